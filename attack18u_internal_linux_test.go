package agentproc

import "testing"

// BenchmarkToolVariableCredentials measures the eighteenth review's step
// of WorkspaceSandbox: the tools' own variables read, and the listed
// entries re-rooted under those that are set (none here unless the
// benchmark's environment sets them; the "set" case sets them all).
func BenchmarkToolVariableCredentials(b *testing.B) {
	run := func(b *testing.B) {
		for b.Loop() {
			_ = toolVariableCredentials("/work/ws")
		}
	}
	b.Run("none", func(b *testing.B) {
		for _, v := range toolDirVariables {
			b.Setenv(v.env, "")
		}
		for _, env := range toolFileVariables {
			b.Setenv(env, "")
		}
		run(b)
	})
	b.Run("set", func(b *testing.B) {
		for _, v := range toolDirVariables {
			b.Setenv(v.env, "/opt/tools/"+v.env)
		}
		for _, env := range toolFileVariables {
			b.Setenv(env, "/opt/files/"+env)
		}
		run(b)
	})
}
