package agentproc

// SecretForms exposes the forms redaction looks for, so that black-box
// tests can check none of them reaches a surface.
func SecretForms(value string) []string { return secretForms(value) }

// SetOwnerSecretBound sets the bounds of each owner's set of started Env
// secrets (MaxOwnerSecrets, MaxOwnerSecretBytes) to smaller ones, so that
// tests of letting go and refusing stay fast. Call it before any Start.
func SetOwnerSecretBound(m *Manager, entries, bytes int) {
	m.owned.maxN, m.owned.maxBytes = entries, bytes
}
