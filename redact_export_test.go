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

// SetAllOwnersSecretBound sets the bounds of all owners' sets together
// (MaxOwnerSets, MaxAllOwnersSecretBytes) to smaller ones. Call it
// before any Start.
func SetAllOwnersSecretBound(m *Manager, sets, bytes int) {
	m.owned.maxSets, m.owned.maxAllBytes = sets, bytes
}

// OwnerSets returns how many owners' sets m keeps, how many of them hold
// values and the bytes of those values.
func OwnerSets(m *Manager) (kept, valued, bytes int) {
	m.owned.mu.Lock()
	defer m.owned.mu.Unlock()
	for _, set := range m.owned.owners {
		kept++
		if set.valued() {
			valued++
		}
	}
	return kept, valued, m.owned.bytes + m.owned.reserved
}
