package agentproc

// SecretForms exposes the forms redaction looks for, so that black-box
// tests can check none of them reaches a surface.
func SecretForms(value string) []string { return secretForms(value) }
