package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of the seventh attack review as root: docs/sandbox-threats.md,
// "Seventh attack review (root)".

// TestAttackServeTokenFileHiddenAndRedacted: `agentproc serve --listen … --token-file
// FILE` read its token from FILE, which neither its workspace sandbox hid
// (the credential list names ~/.config/agentproc, not a path the operator
// chooses: /etc/agentproc/token, a file beside the work dir; as root the
// tree owns it, without root it is the user's) nor its redaction knew (the
// token is not in serve's environment): a command printed it, in the
// sandbox or not, and the model read the key to serve, which runs commands
// unconfined (from a tree with the network, or through anything the model
// reaches). Now serve hides the file from its trees and redacts the token.
// The control: an unsandboxed serve's tree reads the file (test -r).
func TestAttackServeTokenFileHiddenAndRedacted(t *testing.T) {
	ctx, outside := sandboxAttack(t)
	ws := t.TempDir()
	token := "tok7r-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokenFile := filepath.Join(outside, "serve-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	look := "test -r " + shellQuote(tokenFile) + " && echo readable; cat " + shellQuote(tokenFile) + "; true"
	for _, sandbox := range []string{"none", "workspace"} {
		s := startServe(t, ctx, "--listen", "127.0.0.1:0", "--workdir", ws, "--token-file", tokenFile,
			"--sandbox", sandbox, "--network", map[string]string{"none": "", "workspace": "none"}[sandbox])
		url := []string{"AGENTPROC_URL=" + s.addr}
		out, errOut, code := cli(t, ctx, url, "run", "--token-file", tokenFile, "--", look)
		if code != 0 {
			t.Fatalf("--sandbox %s: run: exit %d, %q, %q", sandbox, code, out, errOut)
		}
		if sandbox == "none" && !strings.Contains(out, "readable") {
			t.Fatalf("control: an unsandboxed tree of serve: %q, want the token file readable", out)
		}
		if sandbox == "workspace" && strings.Contains(out, "readable") {
			t.Errorf("a sandboxed tree of serve read its token file: %q, want it hidden", out)
		}
		if strings.Contains(out, token) {
			t.Errorf("--sandbox %s: the tree printed serve's token: %q, want it redacted", sandbox, out)
		}
	}
}
