package agentproc

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/xerrors"

	"github.com/agentproc/agentproc/internal/egress"
	"github.com/agentproc/agentproc/internal/procfs"
)

// Sandbox is what a confined tree may reach: which files it may read and
// write, which network it sees, and which of the host's environment
// variables it inherits. The kernel enforces it on the shell and everything
// it starts (Linux: Landlock, seccomp, and as root a network and a mount
// namespace and an emptied capability bounding set; see the README's "Sandbox"
// section for what holds where). Set it per Request (Request.Sandbox) or as the Manager's default
// (WithSandbox); nil means no confinement.
//
// A restriction this host cannot enforce makes Start fail with
// ErrUnsupported, naming the field and the reason, and nothing runs, unless
// BestEffort is set. The zero value is usable: read everything, write only
// the work dir and a private temp dir, no network, secret-looking variables
// dropped.
//
// Paths must be absolute; each is resolved (every component, through
// symbolic links, ".." applied to where a link led) when the policy is
// built, and Write and Read grant only the resolved path, opened through
// no link: a link made inside the workspace later cannot widen them.
type Sandbox struct {
	// Write lists the directories the tree may create, change and delete
	// in (and read). The work dir and a private per-process temp dir
	// (exported as TMPDIR, TMP and TEMP, and removed just after the exit
	// is published; Close waits for it) are added unless NoDefaultWrite is
	// set.
	Write []string
	// Read lists what the tree may read. nil means everything except Hide;
	// non-nil means only these, plus what a shell needs to run (the system
	// directories, the shell, /dev/null and the other standard devices, the
	// terminal of a TTY request) and Write.
	Read []string
	// Hide lists files and directories the tree may not read, even when
	// Read is nil. The Manager's state dir and output log dir are always
	// hidden. A hidden path may not lie inside a Write directory (Start
	// fails with ErrInvalidRequest): Landlock cannot take back below a
	// directory what it granted on it.
	Hide []string
	// ReadOnly lists paths inside Write that stay read-only (the work dir's
	// .git in WorkspaceSandbox). Where the host cannot do it (Linux without
	// root: Landlock cannot take write access back below a granted
	// directory) it is not enforced and Info.Warnings says so, whatever
	// BestEffort says: it protects the host's repository from a careless
	// command, not the host from a hostile one. A path that does not
	// exist at Start is not protected for that Start (the tree could make
	// it) and Info.Warnings says so; from the next Start on it is.
	ReadOnly []string
	// Network is what the tree may reach over the network; "" means
	// NetworkNone.
	Network Network
	// AllowPorts are the TCP ports a NetworkPorts tree may connect to (on
	// any address: a proxy's port, for instance). It must be empty for
	// every other Network.
	AllowPorts []int
	// AllowHosts are what a NetworkHosts tree may reach through the
	// Manager's proxy: "name" (ports 443 and 80), "name:port",
	// "*.suffix" or "*.suffix:port" (subdomains, not the apex), or an IP
	// literal or CIDR with an optional port ("10.0.0.0/8:5432",
	// "[fd00::1]:22"), the only way to reach a private-range address.
	// There is no bare "*". It must be empty for every other Network.
	AllowHosts []string
	// Env says which of the host's environment variables the tree inherits.
	Env SandboxEnv
	// BestEffort runs the command with whatever of the policy this host can
	// enforce and lists the rest in Info.Warnings. false, the default,
	// makes Start fail with ErrUnsupported instead, and nothing runs.
	BestEffort bool
	// NoDefaultWrite leaves the work dir and the private temp dir out of
	// Write (no TMPDIR is made).
	NoDefaultWrite bool

	// bound and readBound are set by Narrow: the base policy's Write (and
	// Read and Write, when its Read is a list) resolved, which Start holds
	// this policy's resolved Write, chosen work dir and Read within when it
	// grants them. nil: no base policy.
	bound, readBound []string
}

// Network says what network a sandboxed tree reaches.
type Network string

// The networks a Sandbox can give.
const (
	// NetworkNone: no network at all. As root the tree runs in a network
	// namespace of the Manager's whose loopback is down; otherwise seccomp
	// refuses IPv4 and IPv6 sockets.
	NetworkNone Network = "none"
	// NetworkLoopback: a private loopback that the Manager's sandboxed
	// trees with NetworkLoopback share (a server and its tests), and nothing
	// else. It needs root on Linux (a network namespace).
	NetworkLoopback Network = "loopback"
	// NetworkPorts: TCP connections to Sandbox.AllowPorts only (Landlock
	// ABI 4 or later); no UDP, no listening.
	NetworkPorts Network = "ports"
	// NetworkHost: the host's network, unrestricted.
	NetworkHost Network = "host"
	// NetworkHosts: the hosts Sandbox.AllowHosts names, through a proxy
	// the Manager runs (HTTP CONNECT, plain HTTP and SOCKS5; the tree gets
	// HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and their lower-case forms, and an
	// empty NO_PROXY), and nothing else: as root the tree's network
	// namespace has only a loopback holding its proxy listener; otherwise
	// Landlock (ABI 4) allows a TCP connect to that listener's port only.
	// Each tree has its own listener, so its denials (Info.Denials) are its
	// own. Linux only.
	NetworkHosts Network = "hosts"
)

// SandboxEnv says what environment a sandboxed tree inherits. The host's
// variables (after WithEnv's hook) are passed on except those whose name
// looks like a secret: it contains TOKEN, SECRET, KEY, PASSWORD, PASSWD,
// PASSPHRASE, CREDENTIAL, CREDS, CONNECTION_STRING, AUTH (not AUTHOR but
// AUTHORITY), PRIVATE, COOKIE, SESSION, JWT, BEARER, WEBHOOK, MNEMONIC or
// SEED_PHRASE in any case; or it has PASS or DSN as a word (between
// underscores: DB_PASS, SENTRY_DSN), or PWD, PAT or PW as a word after
// another (MYSQL_PWD, GITHUB_PAT, DB_PW; not PWD, OLDPWD, PATH);
// or it is one of SSH_AUTH_SOCK, DOCKER_HOST, DOCKER_CONFIG,
// KUBECONFIG, GPG_AGENT_INFO, which name a socket or a file of credentials.
// MarkerEnv and PWD are never dropped. Names are patterns only: a password
// inside a URL (DATABASE_URL=postgres://u:pw@host) or under an innocent name
// passes; list such names in Drop. Request.Env is applied after, as given.
type SandboxEnv struct {
	// Keep lists names passed on although they look like secrets; a name
	// ending in "*" keeps every name with that prefix.
	Keep []string
	// Drop lists more names to drop, with the same "*" suffix rule.
	Drop []string
	// Set sets variables after the filter (before Request.Env).
	Set map[string]string
}

// Confinement says how a sandboxed process was confined (Info.Sandbox).
type Confinement struct {
	// Mechanisms are what the kernel enforces, in the order applied:
	// "netns" (a network namespace), "mountns" (a mount namespace),
	// "capabilities" (the bounding set dropped), "no_new_privs",
	// "landlock", "seccomp", "seatbelt" (macOS).
	Mechanisms []string
	// LandlockABI is the Landlock ABI version the rules were written for;
	// 0 without Landlock.
	LandlockABI int
	// Network is the network the tree got.
	Network Network
	// TempDir is the private temp dir (TMPDIR), "" without one.
	TempDir string
}

func (c *Confinement) clone() *Confinement {
	if c == nil {
		return nil
	}
	out := *c
	out.Mechanisms = slices.Clone(c.Mechanisms)
	return &out
}

// SandboxFeatures is what this host can enforce of a Sandbox (SandboxSupport).
type SandboxFeatures struct {
	// Supported is true when a Sandbox without BestEffort can start here
	// with at least NetworkNone or NetworkHost.
	Supported bool
	// Mechanisms lists what is available, named as in Confinement.
	Mechanisms []string
	// LandlockABI is the kernel's Landlock ABI version; 0 without Landlock.
	LandlockABI int
	// Networks lists the Network values this host enforces.
	Networks []Network
	// Missing says, one line each, what cannot be enforced here and why.
	Missing []string
}

// String is a one-line summary for a startup message.
func (f SandboxFeatures) String() string {
	if !f.Supported {
		return "sandbox: unsupported here (" + strings.Join(f.Missing, "; ") + ")"
	}
	s := "sandbox: " + strings.Join(f.Mechanisms, ", ")
	if f.LandlockABI > 0 {
		s += " (Landlock ABI " + strconv.Itoa(f.LandlockABI) + ")"
	}
	nets := make([]string, len(f.Networks))
	for i, n := range f.Networks {
		nets[i] = string(n)
	}
	s += "; networks: " + strings.Join(nets, ", ")
	if len(f.Missing) > 0 {
		s += "; not enforced: " + strings.Join(f.Missing, "; ")
	}
	return s
}

// SandboxSupport reports what this host can enforce of a Sandbox, for a
// startup message or to decide on BestEffort. It probes the kernel once.
func SandboxSupport() SandboxFeatures { return sandboxSupport() }

// credentialPaths are the files and directories under the home directory
// that WorkspaceSandbox hides: keys, tokens and the configuration that
// holds them, where the tools write them by default. The README lists
// them; keep the two in step.
var credentialPaths = []string{
	// Keys, and the version control and cloud command lines.
	".ssh", ".aws", ".gnupg", ".config/gh", ".config/hub", ".docker/config.json",
	".netrc", ".git-credentials", ".config/git/credentials", ".gitcookies",
	".kube", ".config/gcloud", ".azure", ".oci", ".boto", ".s3cfg",
	".config/rclone/rclone.conf", ".pulumi/credentials.json",
	".config/doctl", ".config/containers/auth.json",
	// Package registries.
	".npmrc", ".yarnrc.yml", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml",
	// (Not ~/.m2/settings.xml nor ~/.gradle/gradle.properties: builds need
	// them, and they hold passwords only sometimes; Sandbox.Hide them.)
	".gem/credentials", ".m2/settings-security.xml",
	".config/composer/auth.json", ".composer/auth.json",
	".nuget/NuGet/NuGet.Config",
	// Secret stores and infrastructure tools.
	".vault-token", ".terraform.d/credentials.tfrc.json",
	".password-store", ".local/share/keyrings", ".config/op", ".config/sops",
	// Hosting, CI and data platforms' command lines (fifth attack review).
	".config/glab-cli", ".wrangler/config", ".fly/config.yml", ".config/netlify/config.json",
	".config/configstore/firebase-tools.json", ".databrickscfg", ".snowsql/config", ".dbt/profiles.yml",
	".config/hcloud/cli.toml", ".config/ngrok/ngrok.yml", ".ngrok2/ngrok.yml", ".cloudflared",
	".sentryclirc", ".terraformrc", ".config/stripe/config.toml", ".jfrog",
	// Saved connections' passwords (seventeenth attack review,
	// TestAttackSavedConnectionPasswords): Snowflake's CLI and connectors
	// (the successor of .snowsql), FileZilla's sites (base64), Remmina's
	// RDP and VNC profiles with the key that decrypts them, InfluxDB's
	// CLI tokens.
	".snowflake/connections.toml", ".snowflake/config.toml", ".config/filezilla/sitemanager.xml",
	".config/filezilla/recentservers.xml", ".local/share/remmina", ".config/remmina/remmina.pref", ".influxdbv2/configs",
	// Databases.
	".pgpass", ".my.cnf",
	// A server's certificates and mail (thirteenth attack review,
	// TestAttackServerMailAndBackupSecrets): acme.sh's DNS API token and
	// account key, msmtp's and fetchmail's passwords.
	".acme.sh", ".msmtprc", ".fetchmailrc",
	// The coding agents' and model hubs' own tokens.
	".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json",
	".config/github-copilot/hosts.json", ".config/github-copilot/apps.json",
	".cache/huggingface/token", ".huggingface/token",
	// huggingface_hub (0.25 on) keeps every token a login saved, with
	// its OAuth refresh token, beside the active one (seventeenth attack
	// review, TestAttackHuggingFaceStoredTokens).
	".cache/huggingface/stored_tokens",
	// Browsers (cookies, saved passwords, the history that holds serve's
	// page URL with its token), mail, and agentproc's own. Ubuntu's
	// Firefox and Chromium are snaps, keeping their profiles under ~/snap;
	// Flatpak's under ~/.var/app (fifth attack review).
	".mozilla", ".config/google-chrome", ".config/chromium", ".config/agentproc", ".agentproc-token",
	"snap/firefox/common/.mozilla", "snap/chromium/common/chromium",
	".var/app/org.mozilla.firefox/.mozilla", ".var/app/com.google.Chrome/config/google-chrome",
	".var/app/org.chromium.Chromium/config/chromium", ".config/BraveSoftware", ".config/microsoft-edge",
	".config/vivaldi", ".config/opera", ".thunderbird", "snap/thunderbird/common/.thunderbird",
	// The chat apps' sessions, kept as a browser keeps its cookies:
	// Slack's `d` cookie, Discord's token, Telegram Desktop's tdata, Signal's
	// and Element's database keys, each a signed-in account (seventeenth
	// attack review, TestAttackChatAppSessions). Flatpak's under ~/.var/app;
	// the snaps' (Ubuntu's store installs these as snaps) whole, as each
	// keeps its home in a directory per revision under ~/snap/NAME, which
	// a refresh replaces.
	".config/Slack", ".config/discord", ".local/share/TelegramDesktop", ".config/Signal", ".config/Element",
	"snap/slack", "snap/discord", "snap/telegram-desktop", "snap/signal-desktop",
	".var/app/com.slack.Slack/config/Slack", ".var/app/com.discordapp.Discord/config/discord",
	".var/app/org.telegram.desktop/data/TelegramDesktop", ".var/app/org.signal.Signal/config/Signal",
	".var/app/im.riot.Riot/config/Element",
	// Seventh attack review (TestAttackSecretsOutsideList): the X server's
	// cookie, Docker's TLS client key, cluster admin keys, object store and
	// platform tokens, model API keys, a signing key, publishing passwords,
	// and the histories where typed tokens and passwords stay.
	".Xauthority", ".docker/key.pem", ".minikube", ".talos", ".mc/config.json",
	".config/io.datasette.llm/keys.json", ".local/share/com.vercel.cli", ".supabase/access-token",
	".railway/config.json", ".doppler", ".circleci/cli.yml", ".config/scw/config.yaml", ".config/linode-cli",
	".ollama/id_ed25519", ".sbt/.credentials", ".ivy2/.credentials",
	".bash_history", ".zsh_history", ".psql_history", ".mysql_history", ".rediscli_history",
	// Password managers' ssh agents (TestAttackKeyringAndAgentSockets).
	".1password", ".bitwarden-ssh-agent.sock",
	// Ansible's ssh control masters (ControlPersist=60s by default): a
	// peer that connects runs commands on the managed hosts (thirteenth
	// attack review, TestAttackAnsibleControlSockets).
	".ansible/cp",
	// The coding agents' and their editors' other files (ninth attack
	// review, TestAttackAgentConfigSecrets): the MCP servers' tokens
	// (`claude mcp add -e` writes ~/.claude.json), model API keys, and the
	// transcripts and prompt histories of every session.
	".claude.json", ".claude.json.backup", ".claude/backups", ".claude/settings.json",
	".claude/settings.local.json", ".claude/history.jsonl", ".claude/projects",
	".cursor/mcp.json", ".codeium/windsurf/mcp_config.json", ".config/Claude/claude_desktop_config.json",
	".gemini/settings.json", ".codex/config.toml", ".codex/history.jsonl", ".codex/sessions",
	".local/share/opencode/auth.json", ".aider.conf.yml", ".continue/config.yaml", ".continue/config.json",
	".config/Code/User/mcp.json",
	// Gemini CLI's other secrets: the API key its docs put in
	// ~/.gemini/.env (and ~/.env, which it and aider read last), and the
	// OAuth tokens of its MCP and A2A servers (seventeenth attack review,
	// TestAttackGeminiCLISecrets).
	".gemini/.env", ".env", ".gemini/mcp-oauth-tokens.json", ".gemini/a2a-oauth-tokens.json",
	// More coding agents' logins (seventeenth attack review,
	// TestAttackAgentLoginFiles): Cursor's CLI (cursor-agent), Grok's CLI,
	// pi's and Kimi Code's, each an OAuth session or API keys.
	".config/cursor/auth.json", ".grok/auth.json", ".pi/agent/auth.json", ".kimi-code/credentials",
	// The editors' extension state: Cursor's tokens in the clear, VS
	// Code's extension secrets where no keyring runs.
	".config/Cursor/User/globalStorage", ".config/Code/User/globalStorage", ".config/Windsurf/User/globalStorage",
	".vscode-server/data/User/globalStorage", ".cursor-server/data/User/globalStorage",
	// The same editor's other builds and packages, which keep the same
	// files under their own names (twelfth attack review,
	// TestAttackEditorBuildsSecrets): Insiders, VSCodium, Code - OSS,
	// Flathub's VS Code and VSCodium, and their remote servers.
	".config/Code - Insiders/User/globalStorage", ".config/Code - Insiders/User/mcp.json",
	".config/VSCodium/User/globalStorage", ".config/VSCodium/User/mcp.json",
	".config/Code - OSS/User/globalStorage", ".config/Code - OSS/User/mcp.json",
	".var/app/com.visualstudio.code/config/Code/User/globalStorage",
	".var/app/com.visualstudio.code/config/Code/User/mcp.json",
	".var/app/com.vscodium.codium/config/VSCodium/User/globalStorage",
	".var/app/com.vscodium.codium/config/VSCodium/User/mcp.json",
	".vscode-server-insiders/data/User/globalStorage", ".vscodium-server/data/User/globalStorage",
	".windsurf-server/data/User/globalStorage",
	// More histories: fish's, atuin's (with its sync key), zsh's other
	// usual names, Python's, Node's, SQLite's, the MongoDB shells', irb's.
	".local/share/fish/fish_history", ".local/share/atuin", ".histfile", ".zhistory",
	".python_history", ".node_repl_history", ".sqlite_history", ".dbshell", ".mongosh", ".irb_history",
	// Registry and version control logins (TestAttackMoreCredentialFiles;
	// not pip.conf, .condarc, .bundle/config nor Helm's repositories.yaml,
	// which builds need, as settings.xml above).
	".config/helm/registry/config.json", ".subversion/auth", ".passwd-s3fs", ".wakatime.cfg",
	".kaggle/kaggle.json", ".modal.toml", ".codeium/config.json", ".config/neonctl/credentials.json",
	".expo/state.json", ".jira.d",
	".bluemix", ".aliyun", ".tccli", ".config/openstack/clouds.yaml", ".config/openstack/secure.yaml",
	".ovh.conf", ".vultr-cli.yaml",
	// Remote development and identity platforms' command lines: Coder's
	// session token, Okta's API token, Twilio's API key and secret
	// (eleventh attack review, TestAttackDevPlatformTokens).
	".config/coderv2/session", ".okta/okta.yaml", ".twilio-cli/config.json",
	// More coding agents' tokens (eleventh attack review,
	// TestAttackMoreAgentTokens): Qwen Code's OAuth login (gemini-cli's
	// layout, with its backup) and settings (MCP servers' env), Amp's API
	// key and prompt history, goose's keys where no keyring runs.
	".qwen/oauth_creds.json", ".qwen/oauth_creds.json.bak", ".qwen/settings.json",
	".local/share/amp/secrets.json", ".local/share/amp/history.jsonl", ".config/goose/secrets.yaml",
	// The agents' IDE bridges' auth tokens (Claude Code's and Copilot
	// CLI's lock files) and Claude Code's checkpoints of the files it
	// edited in every project (TestAttackAgentIDEBridgeTokens).
	".claude/ide", ".copilot/ide", ".claude/file-history",
	// git's credential-cache daemon's socket directories: it answers the
	// cached HTTPS password or token to any peer of the user (eleventh
	// attack review, TestAttackGitCredentialCache); covered as root, a
	// pathname socket reachable without (docs/sandbox.md).
	".cache/git/credential", ".git-credential-cache",
	// The container engines a user runs from the home directory: Docker
	// Desktop for Linux's socket, Colima's and Lima's VMs (their sockets,
	// ssh ControlMasters and the VMs' ssh keys; each VM mounts the home).
	// The keys are hidden for both users, the sockets covered as root
	// (eleventh attack review, TestAttackLocalVMKeys,
	// TestAttackHomeEngineSockets).
	".docker/desktop", ".colima", ".lima",
	// Cryptocurrency wallets' keys at their tools' default places
	// (eleventh attack review, TestAttackWalletKeys): Solana's CLI keypair
	// and Sui's keystore and NEAR's credentials hold private keys in the
	// clear; geth's and Foundry's keystores and Electrum's wallets hold
	// them under a password a guess may open offline; Bitcoin Core's
	// wallets are unencrypted unless the user chose otherwise.
	".config/solana/id.json", ".sui/sui_config/sui.keystore", ".near-credentials",
	".ethereum/keystore", ".foundry/keystores", ".bitcoin/wallets", ".bitcoin/wallet.dat", ".electrum/wallets",
	// The other engines' VM keys and a remote engine's TLS key
	// (thirteenth attack review, TestAttackMoreEngineKeys): Rancher
	// Desktop's Lima home on Linux, podman machine's one key for all its
	// VMs (its connections log in as root too), the Docker contexts' TLS
	// material (a remote dockerd is root on its host).
	".local/share/rancher-desktop/lima", ".local/share/containers/podman/machine", ".docker/contexts/tls",
	// More logins (TestAttackMoreLoginFiles): Teleport's keys and
	// certificates, MySQL's obfuscated login paths, uv's and Poetry's
	// index passwords, Argo CD's CLI token at either of its paths.
	".tsh", ".mylogin.cnf", ".local/share/uv/credentials", ".config/pypoetry/auth.toml",
	".config/argocd/config", ".argocd/config",
}

// systemSecretPaths are hidden by WorkspaceSandbox as well: a root tree
// whose capabilities are dropped still owns them (uid 0 reads root's 0600
// files: TestAttackRootOwnedSecret). A pattern (filepath.Match) is expanded
// when WorkspaceSandbox is called. Root's private files elsewhere stay
// readable to a root tree (the README's "What does not hold").
var systemSecretPaths = []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/root/.ssh",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private", "/etc/wireguard", "/etc/krb5.keytab",
	"/etc/kubernetes", "/etc/rancher", "/etc/letsencrypt", "/var/lib/kubelet/pki",
	// What a container platform mounts in, world-readable: Kubernetes'
	// service account and workload identity tokens, Docker's secrets
	// (seventh attack review, TestAttackMountedSecrets).
	"/run/secrets", "/var/run/secrets",
	// GitHub Codespaces' copies of the codespace's GITHUB_TOKEN (.env)
	// and the user's Codespaces secrets (.env-secrets, base64), kept for
	// login shells, readable by the codespace's user: the environment's
	// filter is undone by a cat (eleventh attack review,
	// TestAttackCodespacesSecrets). The whole directory, fail-closed.
	"/workspaces/.codespaces/shared",
	// The kernel's trace buffers, root's 0640 (0700 under debugfs): what
	// the host traces, command lines and strings a probe copies (ninth
	// attack review, TestAttackRootReadsTraceBuffer).
	"/sys/kernel/tracing", "/sys/kernel/debug",
	// The copies the system keeps of the password files (shadow's "-"
	// backups that useradd and passwd leave, Debian's daily
	// /var/backups copies, pam_pwhistory's old hashes): the same hashes,
	// root's 0640 or 0600, which a root tree owns (TestAttackSystemSecretCopies).
	"/etc/shadow-", "/etc/gshadow-", "/var/backups/shadow.bak", "/var/backups/gshadow.bak",
	"/etc/security/opasswd",
	// Failed logins, root's 0600 or 0660: a password typed at a login's
	// user name prompt is kept there as the name.
	"/var/log/btmp",
	// Root's other usual 0600 secrets: Debian's MySQL maintenance password,
	// VPN and PPP secrets, Wi-Fi and VPN connections' passwords, Red Hat's
	// private TLS keys, mesh VPN node keys, CI runner tokens, cloud-init's
	// user data, SSSD's bind passwords, Ceph's admin keyring, and the
	// container engines' and etcd's state (a container's environment is
	// in its config under /var/lib/docker).
	"/etc/mysql/debian.cnf", "/etc/ipsec.secrets", "/etc/ipsec.d/private", "/etc/swanctl/private",
	"/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/openvpn",
	"/etc/NetworkManager/system-connections", "/etc/wpa_supplicant", "/var/lib/iwd", "/etc/netplan",
	"/etc/pki/tls/private", "/var/lib/tailscale", "/var/lib/zerotier-one", "/var/lib/netbird",
	"/etc/gitlab-runner", "/etc/gitlab", "/var/lib/cloud", "/etc/sssd", "/etc/ceph",
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/rancher", "/var/lib/etcd",
	// SSSD's caches (a domain user's cached password hash, the class of
	// /etc/shadow), sssd-kcm's database of every user's Kerberos tickets
	// with the key that opens it, and gssproxy's per-uid ticket caches
	// beside its socket; not /var/lib/sss/mc, the public name cache a
	// tree's own user lookups read (thirteenth attack review,
	// TestAttackKerberosDaemonsAndSSSD).
	"/var/lib/sss/db", "/var/lib/sss/secrets", "/var/lib/gssproxy",
	// The root file system's snapshots, each a copy of every file above:
	// snapper's (openSUSE's default on btrfs) and Timeshift's (Linux
	// Mint's, where the system disk holds them) (thirteenth attack
	// review, TestAttackSystemSnapshots).
	"/.snapshots", "/timeshift",
	// systemd's credentials: each running root service's, in the clear,
	// and the system's own, the credential stores, and the host key that
	// decrypts the encrypted ones where no TPM binds them (thirteenth
	// attack review, TestAttackSystemdCredentials).
	"/run/credentials", "/etc/credstore", "/etc/credstore.encrypted", "/run/credstore",
	"/run/credstore.encrypted", "/var/lib/systemd/credential.secret",
	// A server's relay and DNS passwords, Samba's private store (a
	// winbind member's machine password, users' NT hashes), a Kerberos
	// KDC's stash and database, borgmatic's repository passphrases
	// (TestAttackServerMailAndBackupSecrets).
	"/etc/postfix/sasl_passwd", "/etc/postfix/sasl_passwd.db", "/etc/postfix/sasl_passwd.lmdb",
	"/etc/msmtprc", "/etc/ssmtp", "/etc/ddclient.conf", "/etc/ddclient", "/var/lib/samba/private",
	"/etc/krb5kdc", "/var/kerberos/krb5kdc", "/var/lib/krb5kdc", "/etc/borgmatic", "/etc/borgmatic.d",
	// The state of the daemons and agents a server runs as root
	// (fourteenth attack review, TestAttackRootDaemonSecrets): APT's
	// repository passwords (Ubuntu Pro's token among them) and Ubuntu
	// Pro's machine token, snapd's state (the store's macaroons) and
	// device keys, cloud-init's unredacted instance data in /run, the
	// cloud agents' (Azure's provisioning data with the admin password
	// and custom data, AWS SSM's registration key), the configuration
	// agents' keys (Salt, Puppet, Chef), NixOS's decrypted secrets
	// (agenix, NixOps' /run/keys) and sops-nix's age key, root's
	// podman registry logins and storage, libvirt's secrets, CUPS's
	// printer URIs and key, LDAP bind passwords, davfs2's and rsyncd's
	// passwords, and Proxmox's private cluster keys.
	"/etc/apt/auth.conf", "/etc/apt/auth.conf.d", "/var/lib/ubuntu-advantage/private",
	"/var/lib/snapd/state.json", "/var/lib/snapd/device", "/run/cloud-init/instance-data-sensitive.json",
	"/run/cloud-init/combined-cloud-config.json", "/var/lib/waagent", "/var/lib/amazon/ssm",
	"/etc/salt/pki", "/etc/puppetlabs/puppet/ssl", "/var/lib/puppet/ssl", "/etc/chef",
	"/run/agenix", "/run/agenix.d", "/run/keys", "/var/lib/sops-nix",
	"/etc/containers/auth.json", "/run/containers/0/auth.json", "/var/lib/containers",
	"/etc/libvirt/secrets", "/etc/cups/printers.conf", "/etc/cups/ssl",
	"/etc/ldap.secret", "/etc/libnss-ldap.secret", "/etc/pam_ldap.secret",
	"/etc/davfs2/secrets", "/etc/rsyncd.secrets", "/etc/pve/priv",
	// Disks' key files where systemd-cryptsetup looks for a volume's key
	// that /etc/crypttab does not name (crypttabKeyFiles reads the named
	// ones); MicroK8s's credentials (an admin kubeconfig, the token list)
	// and certificates' keys (the cluster CA's), k0s's state (its PKI,
	// admin kubeconfig, etcd and containerd), Guix's store signing key
	// (substitutes other hosts trust), and the Nix daemon's netrc (a
	// binary cache's password) (fifteenth attack review,
	// TestAttackDiskKeyFiles, TestAttackRootClusterSecrets).
	"/etc/cryptsetup-keys.d", "/run/cryptsetup-keys.d", "/var/snap/microk8s/current/credentials",
	"/var/snap/microk8s/current/certs", "/var/lib/k0s", "/etc/guix/signing-key.sec", "/etc/nix/netrc",
	// The identities of agents a server runs as root (sixteenth attack
	// review, TestAttackRootAgentSecrets): a Cloudflare Tunnel's
	// credentials (whoever holds them serves its hostnames), a Teleport
	// node's keys and join token, a Wazuh or OSSEC agent's key.
	"/etc/cloudflared", "/var/lib/teleport", "/etc/teleport.yaml", "/var/ossec/etc/client.keys",
}

// windowsHomesGlob matches the Windows users' home directories that WSL
// mounts (drvfs: /mnt/c/Users/NAME), readable and owned by the Linux user
// there. Their credentials are the same user's: ~/.aws, ~/.ssh, ~/.kube
// and the gh, gcloud and browsers' profiles under AppData (ninth attack
// review, TestAttackWindowsHomeCredentials). Nothing matches elsewhere.
const windowsHomesGlob = "/mnt/*/Users/*"

// windowsHomeShared are the entries of C:\Users that are no one's home.
var windowsHomeShared = []string{"All Users", "Default", "Default User", "Public", "desktop.ini"}

// windowsCredentialPaths are, under a Windows home, where Windows programs
// keep what credentialPaths names under a Unix one (which is hidden there
// too: the Windows builds of ssh, the AWS CLI, kubectl and Docker use the
// same names).
var windowsCredentialPaths = []string{
	"_netrc", "AppData/Roaming/GitHub CLI", "AppData/Roaming/gcloud", "AppData/Roaming/gnupg",
	"AppData/Roaming/rclone", "AppData/Roaming/npm/etc/npmrc", "AppData/Roaming/Claude",
	"AppData/Roaming/Code/User/mcp.json", "AppData/Roaming/Mozilla", "AppData/Local/Google/Chrome/User Data",
	"AppData/Local/Microsoft/Edge/User Data", "AppData/Local/BraveSoftware",
	"AppData/Roaming/Microsoft/Credentials", "AppData/Local/Microsoft/Credentials", "AppData/Roaming/Microsoft/Protect",
	"AppData/Roaming/Microsoft/Windows/PowerShell/PSReadLine",
}

// windowsHomesCredentials returns the credential paths under every
// Windows home windowsHomesGlob finds.
func windowsHomesCredentials() []string {
	homes, _ := filepath.Glob(windowsHomesGlob) // the pattern is this file's
	var out []string
	for _, h := range homes {
		if slices.Contains(windowsHomeShared, filepath.Base(h)) {
			continue
		}
		for _, p := range append(slices.Clone(credentialPaths), windowsCredentialPaths...) {
			out = append(out, filepath.Join(h, filepath.FromSlash(p)))
		}
	}
	return out
}

// krb5Conf is the Kerberos configuration whose presence says that the
// default ticket cache may appear later.
const krb5Conf = "/etc/krb5.conf"

// krb5CacheDir is where MIT's and Heimdal's built-in default ticket
// cache and sssd's caches are made. A variable only so that
// TestAttackKerberosTicketCache makes its caches in a directory of its
// own: one at /tmp/krb5cc_UID, even for a moment, is hidden from every
// policy resolved meanwhile, and a policy whose Write holds /tmp refuses
// its Start then ("Sandbox.Hide … lies inside the writable …").
var krb5CacheDir = "/tmp"

// kerberosCaches returns the user's Kerberos ticket caches kept in files:
// KRB5CCNAME's (FILE:path or a bare path, DIR:path for a collection),
// the built-in default /tmp/krb5cc_UID (MIT's and Heimdal's) where it
// exists or Kerberos is configured, and sssd's /tmp/krb5cc_UID_XXXXXX that
// exist now. A cache holds the ticket-granting ticket and its session
// key: whoever reads it is the user to every Kerberised service until it
// expires (eleventh attack review, TestAttackKerberosTicketCache). The
// default is hidden only where it may be used, since without root a
// hidden path in /tmp has every other entry of /tmp granted one by one
// (what is made there later is then unreadable to the tree). KEYRING: and
// KCM: caches are not files: keyctl is refused by the seccomp filter, and
// the KCM daemon's socket is a pathname socket (docs/sandbox.md), a door
// as root (hostDoors).
func kerberosCaches() []string {
	uid := os.Getuid()
	if uid < 0 { // Windows
		return nil
	}
	var out []string
	if p := ccachePath(os.Getenv("KRB5CCNAME")); p != "" {
		out = append(out, p)
	}
	def := filepath.Join(krb5CacheDir, "krb5cc_"+strconv.Itoa(uid))
	_, errDef := os.Lstat(def)
	_, errConf := os.Stat(krb5Conf)
	if errDef == nil || errConf == nil {
		out = append(out, def)
	}
	sssd, _ := filepath.Glob(def + "_*") // the pattern is this file's
	return append(out, sssd...)
}

// ccachePath is the file or directory a KRB5CCNAME value names, or "" for
// a cache that is not one (KEYRING:, KCM:, MEMORY:) or a relative path.
// DIR::path names one file of a collection; the collection is hidden.
func ccachePath(name string) string {
	if name == "" {
		return ""
	}
	typ, rest, ok := strings.Cut(name, ":")
	if !ok || strings.HasPrefix(name, "/") {
		typ, rest = "FILE", name // a bare path is a file cache
	}
	switch typ {
	case "FILE":
	case "DIR":
		if strings.HasPrefix(rest, ":") {
			rest = filepath.Dir(rest[1:])
		}
	default:
		return ""
	}
	if !filepath.IsAbs(rest) {
		return ""
	}
	return filepath.Clean(rest)
}

// fstabPath is the file system table fstabCredentialFiles reads. A
// variable only so that TestAttackFstabCredentialsFile reads one of its
// own.
var fstabPath = "/etc/fstab"

// crypttabPath is the table of encrypted block devices crypttabKeyFiles
// reads. A variable only so that TestAttackDiskKeyFiles reads one of its
// own.
var crypttabPath = "/etc/crypttab"

// nixConfPath is the Nix daemon's configuration nixConfSecretFiles
// reads. A variable only so that TestAttackNixConfSecretFiles reads one
// of its own.
var nixConfPath = "/etc/nix/nix.conf"

// mountUnitGlob and autofsMapGlob match the other tables that name a
// mount's credentials file: systemd's mount units and autofs's maps.
// Variables only so that TestAttackMountUnitAndAutofsCredentials reads
// its own.
var (
	mountUnitGlob = "/etc/systemd/system/*.mount"
	autofsMapGlob = "/etc/auto.*"
)

// fstabCredentialOptions are the mount options whose value names a file
// of secrets: mount.cifs's credentials file (and its short form), s3fs's
// password file, sshfs's ssh key, gocryptfs's password file, mount.ceph's
// secret, eCryptfs's passphrase file (inside key=passphrase:...), and
// rclone's configuration (its remotes' tokens; rclone's fstab helper
// passes config= to `rclone mount`). Compared without regard to case: ssh's
// keywords are case-insensitive, so sshfs takes identityfile= as well
// (fifteenth attack review, TestAttackFstabCredentialForms).
var fstabCredentialOptions = []string{"credentials=", "cred=", "passwd_file=", "IdentityFile=", "passfile=",
	"secretfile=", "passphrase_passwd_file=", "config="}

// fstabCredentialFiles returns the files that the file system table names
// as a mount's credentials, where the name is absolute: mount.cifs's
// documentation has the password of an fstab share kept in such a file,
// root's 0600, at a place of the administrator's choosing
// (/root/.smbcredentials, /etc/cifs-creds), which a root tree owns and
// read (fourteenth attack review, TestAttackFstabCredentialsFile). The
// table itself is everyone's to read (a password put inline in it is not
// the sandbox's to keep). The options field is read as mount reads it: its
// octal escapes (\040 for a space) undone, each option, and each
// colon-separated part of one (eCryptfs's key=passphrase:NAME=FILE),
// matched without regard to case. Hiding a file that merely looks like
// one costs nothing but its reading.
func fstabCredentialFiles() []string {
	var out []string
	for _, fields := range tableRows(fstabPath, 4) {
		out = append(out, credentialOptionFiles(procfs.Unescape(fields[3]), fields[2])...)
	}
	return append(out, otherMountTableCredentialFiles()...)
}

// otherMountTableCredentialFiles returns the credentials files that
// systemd's mount units (Options=, with Type=) and autofs's maps (a
// field -OPTIONS, with fstype= among them) name, as fstabCredentialFiles
// takes fstab's (fifteenth attack review,
// TestAttackMountUnitAndAutofsCredentials). A few small files read per
// WorkspaceSandbox call where they exist; a glob of each place where not.
func otherMountTableCredentialFiles() []string {
	var out []string
	units, _ := filepath.Glob(mountUnitGlob) // the pattern is this file's
	for _, unit := range units {
		var fstype string
		var opts []string
		for _, fields := range tableRows(unit, 1) {
			key, val, ok := strings.Cut(strings.Join(fields, " "), "=")
			switch key = strings.TrimSpace(key); {
			case !ok:
			case key == "Type":
				fstype = strings.TrimSpace(val)
			case key == "Options":
				opts = append(opts, strings.TrimSpace(val))
			}
		}
		for _, o := range opts {
			out = append(out, credentialOptionFiles(o, fstype)...)
		}
	}
	maps, _ := filepath.Glob(autofsMapGlob) // the pattern is this file's
	for _, m := range maps {
		for _, fields := range tableRows(m, 2) {
			for _, f := range fields {
				if o, ok := strings.CutPrefix(f, "-"); ok {
					out = append(out, credentialOptionFiles(o, o)...) // o holds fstype= where it is set
				}
			}
		}
	}
	return out
}

// credentialOptionFiles returns the absolute files that the mount options
// opts (comma-separated, escapes undone) name as credentials
// (fstabCredentialOptions); fstype says whether config= is rclone's.
func credentialOptionFiles(opts, fstype string) []string {
	var out []string
	for opt := range strings.SplitSeq(opts, ",") {
		for part := range strings.SplitSeq(opt, ":") {
			for _, key := range fstabCredentialOptions {
				if key == "config=" && !strings.Contains(fstype, "rclone") {
					continue // another file system's config= need not be a secret
				}
				if len(part) > len(key) && strings.EqualFold(part[:len(key)], key) && filepath.IsAbs(part[len(key):]) {
					out = append(out, filepath.Clean(part[len(key):]))
				}
			}
		}
	}
	return out
}

// nixConfSecretFiles returns the files that the Nix daemon's
// configuration names as its binary cache's signing keys
// (secret-key-files, a list) and its netrc (netrc-file): a signing key
// signs store paths that every host trusting the cache substitutes and
// runs; root's 0600 at the administrator's choice of place, which a root
// tree owns and read (fifteenth attack review,
// TestAttackNixConfSecretFiles). /etc/nix/netrc, the default, is in
// systemSecretPaths. The configuration itself stays readable, as fstab
// does (on NixOS it is a store path, everyone's to read).
func nixConfSecretFiles() []string {
	var out []string
	for _, fields := range tableRows(nixConfPath, 1) {
		key, val, ok := strings.Cut(strings.Join(fields, " "), "=")
		if key = strings.TrimSpace(key); !ok || (key != "secret-key-files" && key != "netrc-file") {
			continue
		}
		for _, f := range strings.Fields(val) {
			if filepath.IsAbs(f) {
				out = append(out, filepath.Clean(f))
			}
		}
	}
	return out
}

// crypttabKeyFiles returns the key files that the table of encrypted
// block devices names: each volume's third field where it is an absolute
// file outside /dev (not none, -, /dev/urandom for swap, or a key on
// another device, NAME:DEVICE), and TrueCrypt's tcrypt-keyfile= options.
// Each is a disk's key, root's 0400 or 0600, at a place of the
// administrator's choosing (/root/keyfile, /etc/luks-keys), which a root
// tree owns and read (fifteenth attack review, TestAttackDiskKeyFiles).
// systemd-cryptsetup's default places, /etc/cryptsetup-keys.d and
// /run/cryptsetup-keys.d, are in systemSecretPaths.
func crypttabKeyFiles() []string {
	var out []string
	for _, fields := range tableRows(crypttabPath, 3) {
		if key := procfs.Unescape(fields[2]); filepath.IsAbs(key) && !strings.Contains(key, ":") && !within(filepath.Clean(key), "/dev") {
			out = append(out, filepath.Clean(key))
		}
		if len(fields) < 4 {
			continue
		}
		for opt := range strings.SplitSeq(procfs.Unescape(fields[3]), ",") {
			if v, ok := strings.CutPrefix(opt, "tcrypt-keyfile="); ok && filepath.IsAbs(v) {
				out = append(out, filepath.Clean(v))
			}
		}
	}
	return out
}

// tableRows returns the rows of the table at path (fstab's and crypttab's
// form: whitespace-separated fields, # comments) with at least min
// fields; none where it cannot be read.
func tableRows(path string, min int) [][]string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out [][]string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < min || strings.HasPrefix(fields[0], "#") {
			continue
		}
		out = append(out, fields)
	}
	return out
}

// homeCredentials returns credentialPaths under $HOME and, where $HOME is
// unset or names another directory, under the user's home as the password
// database names it: a host started without $HOME (a systemd service
// without User=, env -i) hid none of the home's credentials, and one whose
// $HOME points elsewhere (a tool's or a test runner's scratch home) hid
// the scratch home's, while a tree reads the real one by its name in
// /etc/passwd (sixteenth attack review, TestAttackHomeCredentialsWithoutHOME).
// The second home's paths that lie inside dir, writable anyway, are left
// out, so that a service whose home is its work dir is not refused every
// Start for them.
func homeCredentials(dir string) []string {
	var out []string
	home, err := os.UserHomeDir()
	if err == nil && filepath.IsAbs(home) {
		for _, p := range credentialPaths {
			out = append(out, filepath.Join(home, p))
		}
	}
	// Tools that follow the XDG base directories (gh, git, rclone,
	// Podman, uv…) keep what credentialPaths names under .config and
	// .local/share under $XDG_CONFIG_HOME and $XDG_DATA_HOME where those
	// are set: a host with another hid none of them (sixteenth attack
	// review, TestAttackXDGConfigHomeCredentials). And under
	// $XDG_CACHE_HOME what they name under .cache: Hugging Face's token
	// (huggingface_hub's HF_HOME defaults to $XDG_CACHE_HOME/huggingface)
	// and git's credential cache socket, which a host with the cache
	// moved (as clusters move it off a home's quota) left readable
	// (seventeenth attack review, TestAttackXDGCacheHomeCredentials).
	for _, x := range []struct{ prefix, env string }{{".config/", "XDG_CONFIG_HOME"}, {".local/share/", "XDG_DATA_HOME"}, {".cache/", "XDG_CACHE_HOME"}} {
		base := os.Getenv(x.env)
		if !filepath.IsAbs(base) || (err == nil && filepath.Clean(base) == filepath.Join(home, x.prefix)) {
			continue
		}
		for _, p := range credentialPaths {
			if rest, ok := strings.CutPrefix(p, x.prefix); ok && !within(filepath.Join(base, rest), dir) {
				out = append(out, filepath.Join(base, rest))
			}
		}
	}
	out = append(out, toolVariableCredentials(dir)...)
	db := passwdHome()
	if !filepath.IsAbs(db) || (err == nil && filepath.Clean(db) == filepath.Clean(home)) {
		return out
	}
	for _, p := range credentialPaths {
		if h := filepath.Join(db, p); !within(h, dir) {
			out = append(out, h)
		}
	}
	return out
}

// toolDirVariables are the variables with which one tool moves the
// directory that credentialPaths names under the home (prefix: an entry
// equal to it without its slash is the directory, one under it a file
// there); sub is the directory under the variable's value where the tool
// puts it (Gemini CLI's variable moves its home, not .gemini).
var toolDirVariables = []struct{ env, prefix, sub string }{
	{"CARGO_HOME", ".cargo/", ""}, {"GNUPGHOME", ".gnupg/", ""}, {"DOCKER_CONFIG", ".docker/", ""},
	{"CODEX_HOME", ".codex/", ""}, {"CLAUDE_CONFIG_DIR", ".claude/", ""}, {"GEMINI_CLI_HOME", ".gemini/", ".gemini"},
	{"HF_HOME", ".cache/huggingface/", ""}, {"AZURE_CONFIG_DIR", ".azure/", ""}, {"CLOUDSDK_CONFIG", ".config/gcloud/", ""},
	{"PASSWORD_STORE_DIR", ".password-store/", ""}, {"GH_CONFIG_DIR", ".config/gh/", ""}, {"COMPOSER_HOME", ".composer/", ""},
	{"POETRY_CONFIG_DIR", ".config/pypoetry/", ""}, {"DOCKER_CERT_PATH", ".docker/", ""},
}

// toolDirFiles are files a tool keeps in its variable's directory that
// lie beside that directory in the home: Claude Code moves ~/.claude.json
// (its OAuth account and MCP servers' settings) into $CLAUDE_CONFIG_DIR.
var toolDirFiles = map[string][]string{"CLAUDE_CONFIG_DIR": {".claude.json", ".claude.json.backup"}}

// toolFileVariables name one credential file each (KUBECONFIG a list of
// them), in place of a credentialPaths entry, or a key no entry names:
// Google's application default credentials (a service account's key) and
// the web identity token a Kubernetes pod assumes its cloud role with.
var toolFileVariables = []string{"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "KUBECONFIG", "HF_TOKEN_PATH",
	"HF_STORED_TOKENS_PATH", "PGPASSFILE", "NPM_CONFIG_USERCONFIG", "NETRC", "RCLONE_CONFIG", "TF_CLI_CONFIG_FILE",
	"BOTO_CONFIG", "OCI_CLI_CONFIG_FILE", "TALOSCONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_WEB_IDENTITY_TOKEN_FILE"}

// toolVariableCredentials returns the credentials that the common tools'
// own variables move out of the home: a host whose $CARGO_HOME,
// $GNUPGHOME, $CODEX_HOME or $CLAUDE_CONFIG_DIR (set by installers,
// container images, and agents' users keeping two logins apart) names
// another directory hid none of that tool's files, and a tree read the
// registry token, the private keys, or the coding agent's own login
// (eighteenth attack review, TestAttackToolVariableCredentials). A
// relative value is skipped, as the tools' own documentation gives them
// absolute; a path in the work dir (writable anyway) or one that holds
// the work dir (hiding it would refuse every Start) is left out.
func toolVariableCredentials(dir string) []string {
	var out []string
	keep := func(p string) {
		if p = filepath.Clean(p); p != "/" && !within(p, dir) && !within(dir, p) {
			out = append(out, p)
		}
	}
	for _, v := range toolDirVariables {
		base := os.Getenv(v.env)
		if !filepath.IsAbs(base) {
			continue
		}
		base = filepath.Join(base, v.sub)
		for _, f := range toolDirFiles[v.env] {
			keep(filepath.Join(base, f))
		}
		for _, p := range credentialPaths {
			if p+"/" == v.prefix {
				keep(base)
			} else if rest, ok := strings.CutPrefix(p, v.prefix); ok {
				keep(filepath.Join(base, rest))
			}
		}
	}
	for _, env := range toolFileVariables {
		for f := range strings.SplitSeq(os.Getenv(env), string(os.PathListSeparator)) {
			if filepath.IsAbs(f) {
				keep(f)
			}
		}
	}
	return out
}

// userRuntimeDir is the user's runtime dir as systemd-logind makes it,
// /run/user/UID ("" where there is no uid). A variable for tests
// (SetUserRuntimeDir).
var userRuntimeDir = func() string {
	if uid := os.Getuid(); uid >= 0 {
		return "/run/user/" + strconv.Itoa(uid)
	}
	return ""
}

// passwdHome is the current user's home directory as the password
// database names it, "" where it cannot be read; os/user reads it once
// per process. A variable for tests (SetPasswdHome).
var passwdHome = func() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// WorkspaceSandbox is the usual policy for a model's commands in dir: write
// dir and a private temp dir, read everything but the usual credential
// paths (~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, ~/.docker/config.json,
// ~/.netrc, ~/.git-credentials, ~/.kube, the coding agents' own tokens
// such as ~/.claude/.credentials.json and ~/.codex/auth.json, ~/.pgpass
// and more, listed in the README, and the user's Kerberos ticket caches;
// the Manager's state dir is always hidden), dir/.git read-only where the
// host can, no network, secret-looking variables dropped, and fail-closed
// (BestEffort false).
// dir is made absolute; commands should run in it (Request.WorkDir).
func WorkspaceSandbox(dir string) *Sandbox {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sb := &Sandbox{
		Write:    []string{dir},
		ReadOnly: []string{filepath.Join(dir, ".git")},
		Network:  NetworkNone,
	}
	sb.Hide = append(sb.Hide, homeCredentials(dir)...)
	sb.Hide = append(sb.Hide, windowsHomesCredentials()...)
	sb.Hide = append(sb.Hide, kerberosCaches()...)
	// Podman's, Buildah's and skopeo's registry logins (`podman login`)
	// default to the runtime dir, not ~/.config/containers/auth.json: the
	// one $XDG_RUNTIME_DIR names, and logind's /run/user/UID, which they
	// take where it is unset (a host without a session's variables hid
	// none; sixteenth attack review, TestAttackRuntimeDirAuthWithoutXDG).
	for _, rt := range []string{os.Getenv("XDG_RUNTIME_DIR"), userRuntimeDir()} {
		if filepath.IsAbs(rt) {
			sb.Hide = append(sb.Hide, filepath.Join(rt, "containers", "auth.json"))
		}
	}
	sb.Hide = append(sb.Hide, fstabCredentialFiles()...)
	sb.Hide = append(sb.Hide, crypttabKeyFiles()...)
	sb.Hide = append(sb.Hide, nixConfSecretFiles()...)
	for _, p := range systemSecretPaths {
		if !filepath.IsAbs(p) { // not on Windows
			continue
		}
		if strings.ContainsAny(p, "*?[") {
			matches, _ := filepath.Glob(p) // the pattern is this file's
			sb.Hide = append(sb.Hide, matches...)
			continue
		}
		sb.Hide = append(sb.Hide, p)
	}
	return sb
}

// Clone returns a deep copy of sb (nil for nil).
func (sb *Sandbox) Clone() *Sandbox {
	if sb == nil {
		return nil
	}
	out := *sb
	out.Write = slices.Clone(sb.Write)
	out.Read = slices.Clone(sb.Read)
	out.Hide = slices.Clone(sb.Hide)
	out.ReadOnly = slices.Clone(sb.ReadOnly)
	out.AllowPorts = slices.Clone(sb.AllowPorts)
	out.bound = slices.Clone(sb.bound)
	out.readBound = slices.Clone(sb.readBound)
	out.AllowHosts = slices.Clone(sb.AllowHosts)
	out.Env.Keep = slices.Clone(sb.Env.Keep)
	out.Env.Drop = slices.Clone(sb.Env.Drop)
	if sb.Env.Set != nil {
		out.Env.Set = make(map[string]string, len(sb.Env.Set))
		for k, v := range sb.Env.Set {
			out.Env.Set[k] = v
		}
	}
	return &out
}

// network returns the Network, with "" read as NetworkNone.
func (sb *Sandbox) network() Network {
	if sb.Network == "" {
		return NetworkNone
	}
	return sb.Network
}

// maxSandboxPaths bounds each path list of a Sandbox. Each path costs the
// host work at the policy's resolve (its links, its siblings' Landlock
// rules without root, its cover as root): an httpapi client's Hide of
// about 8,000 paths (350 KB, within the body limit) took 5.0 s of the
// host's CPU for one Start without root and 9.5 s as root (twelfth attack
// review). WorkspaceSandbox hides 236 paths here.
const maxSandboxPaths = 1024

// validate checks every field of sb; its errors name the field. It is the
// one place a Sandbox is validated (Start and httpapi both call it through
// Validate).
func (sb *Sandbox) validate() error {
	lists := []struct {
		name  string
		paths []string
	}{{"Write", sb.Write}, {"Read", sb.Read}, {"Hide", sb.Hide}, {"ReadOnly", sb.ReadOnly}}
	for _, l := range lists {
		if len(l.paths) > maxSandboxPaths {
			return xerrors.Errorf("Sandbox.%s has %d paths, more than %d: %w", l.name, len(l.paths), maxSandboxPaths, ErrInvalidRequest)
		}
		for i, p := range l.paths {
			switch {
			case p == "":
				return xerrors.Errorf("Sandbox.%s[%d] is empty: %w", l.name, i, ErrInvalidRequest)
			case strings.ContainsRune(p, 0):
				return xerrors.Errorf("Sandbox.%s[%d] contains a NUL byte: %w", l.name, i, ErrInvalidRequest)
			case !filepath.IsAbs(p):
				return xerrors.Errorf("Sandbox.%s[%d] %q is not an absolute path: %w", l.name, i, p, ErrInvalidRequest)
			}
		}
	}
	if err := validateAllowHosts(sb); err != nil {
		return err
	}
	switch sb.network() {
	case NetworkNone, NetworkLoopback, NetworkHost, NetworkHosts:
		if len(sb.AllowPorts) > 0 {
			return xerrors.Errorf("Sandbox.AllowPorts is set but Sandbox.Network is %q, not %q: %w",
				sb.network(), NetworkPorts, ErrInvalidRequest)
		}
	case NetworkPorts:
		if len(sb.AllowPorts) == 0 {
			return xerrors.Errorf("Sandbox.Network %q needs Sandbox.AllowPorts: %w", NetworkPorts, ErrInvalidRequest)
		}
	default:
		return xerrors.Errorf("Sandbox.Network %q is not one of none, loopback, ports, hosts, host: %w", sb.Network, ErrInvalidRequest)
	}
	for i, port := range sb.AllowPorts {
		if port < 1 || port > 65535 {
			return xerrors.Errorf("Sandbox.AllowPorts[%d] = %d is outside 1-65535: %w", i, port, ErrInvalidRequest)
		}
	}
	for _, l := range []struct {
		name  string
		names []string
	}{{"Env.Keep", sb.Env.Keep}, {"Env.Drop", sb.Env.Drop}} {
		for i, n := range l.names {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return xerrors.Errorf("Sandbox.%s[%d] %q is not a variable name: %w", l.name, i, n, ErrInvalidRequest)
			}
		}
	}
	if err := validateEnv(sb.Env.Set); err != nil {
		return xerrors.Errorf("Sandbox.Env.Set: %w", err)
	}
	return nil
}

// Validate reports whether sb can be used, naming the field that cannot,
// with an error matching ErrInvalidRequest. Start calls it; a server can
// call it to refuse a client's policy early.
func (sb *Sandbox) Validate() error {
	if sb == nil {
		return nil
	}
	return sb.validate()
}

// sandboxPolicy is a validated Sandbox made concrete for one Start: paths
// cleaned and resolved through links, the defaults added, and the hidden
// paths checked against the writable ones. Its key names the policy, so
// that the OS layer builds what it enforces once per distinct policy.
type sandboxPolicy struct {
	write, read, hide, readOnly []string // nil read: everything
	network                     Network
	ports                       []int
	hosts                       *egress.List // NetworkHosts: the parsed AllowHosts
	hostsKey                    string       // AllowHosts, sorted, for key
	bestEffort                  bool
	tty                         bool
	shell                       string // the shell's resolved path, for a non-nil Read
	tmpParent                   string // holds the private temp dirs; "" without
	key                         string
	skip                        uint32   // sandboxSkip* bits, for benchmarks only
	unwatched                   bool     // the hidden-link walk could not be watched: resolve at each Start
	hardLinked                  []string // hidden regular files with other hard links: a warning each
}

// The mechanisms a benchmark can leave out to measure each one's share
// (Linux; ignored elsewhere).
const (
	sandboxSkipNetns uint32 = 1 << iota
	sandboxSkipMountns
	sandboxSkipCaps
	sandboxSkipLandlock
	sandboxSkipSeccomp
)

// withHiddenLinkTargets returns hide with the targets of the symbolic
// links found in its directories added (hiddenLinkTargets), sorted, and
// the map of those targets to their links, for the error that names one
// inside write. A target that holds a writable directory (a link to the
// home directory or to /) is left out: hiding it would take the work dir
// away, and what lies there is no more the hidden directory's than any
// readable file. watch is hiddenLinkTargets'.
func withHiddenLinkTargets(hide, write []string, watch func(string) bool) ([]string, hiddenWalk) {
	walk := hiddenLinkTargets(hide, watch)
	for t := range walk.links {
		if slices.ContainsFunc(write, func(w string) bool { return within(w, t) }) {
			delete(walk.links, t)
			continue
		}
		hide = append(hide, t)
	}
	slices.Sort(hide)
	return slices.Compact(hide), walk
}

// hiddenWalk is what hiddenLinkTargets found below the hidden paths.
type hiddenWalk struct {
	links   map[string]string // each link's resolved target, to its link
	linked  []string          // hidden regular files with other hard links, sorted
	watched bool              // every directory read was watched
}

// resolvePaths returns each of paths both cleaned as written and resolved
// (resolvePath), sorted and without duplicates: for Hide and ReadOnly,
// where covering both names only takes more away. A path that does not
// exist is kept: the OS layer ignores it, and Hide then hides what appears
// there later (it is not granted).
func resolvePaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, filepath.Clean(p), resolvePath(p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolvedPaths returns paths resolved (resolvePath) only, sorted and
// without duplicates, non-nil: what is granted (Write, Read) and what a
// grant is checked against. The name as written is left out, so that
// nothing is granted through a link that a later change could point
// elsewhere.
func resolvedPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, resolvePath(p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	if strings.HasSuffix(dir, string(filepath.Separator)) { // a root: / or C:\
		return strings.HasPrefix(p, dir)
	}
	// Compared in place rather than against dir plus a separator: the
	// hidden-path and mount-alias searches call this in loops over every
	// hidden path, where the concatenation's allocation was most of the
	// time (fourteenth attack review, BenchmarkOverlayAliases).
	return strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == filepath.Separator)
}

// sandboxPolicyFor makes the policy for sb, a request in dir, with the
// Manager's own hidden paths added. tmpParent is where private temp dirs
// are made ("" when NoDefaultWrite). dirChosen says the request named dir
// (Request.WorkDir), rather than getting the Manager's default: a
// narrowed sb (Narrow) holds a chosen dir within its base policy.
//
// Write and Read are granted resolved (resolvedPaths), and a narrowed sb's
// are checked again here, on the very strings that are granted, against
// the base policy its check saw: a directory the tree swapped for a link
// after the check resolves outside and is refused with the check's error.
func (m *Manager) sandboxPolicyFor(sb *Sandbox, dir, tmpParent string, dirChosen, tty bool) (*sandboxPolicy, error) {
	return m.resolvePolicy(sb, dir, tmpParent, dirChosen, tty, nil)
}

// resolvePolicy is sandboxPolicyFor with the hidden-link walk watched
// (hiddenLinkTargets' watch; nil: not); pol.unwatched says where it could
// not be.
func (m *Manager) resolvePolicy(sb *Sandbox, dir, tmpParent string, dirChosen, tty bool, watch func(string) bool) (*sandboxPolicy, error) {
	pol := &sandboxPolicy{
		network:    sb.network(),
		ports:      slices.Clone(sb.AllowPorts),
		bestEffort: sb.BestEffort,
		tty:        tty,
		tmpParent:  tmpParent,
	}
	pol.write = resolvedPaths(sb.Write)
	if sb.bound != nil {
		if err := heldWithin("Sandbox.Write", pol.write, sb.bound, "Write"); err != nil {
			return nil, err
		}
	}
	if !sb.NoDefaultWrite {
		if dir != "" {
			r := resolvePath(dir)
			if sb.bound != nil && dirChosen && !inResolved(r, sb.bound) {
				// Not named: dir may be resolved through the tree's links
				// (heldWithin).
				return nil, xerrors.Errorf("the work dir resolves elsewhere since the check and is not inside the base policy's Write: %w", ErrSandboxLoosened)
			}
			pol.write = append(pol.write, r)
		}
		if tmpParent != "" {
			pol.write = append(pol.write, resolvePath(tmpParent))
		}
		slices.Sort(pol.write)
		pol.write = slices.Compact(pol.write)
	}
	if sb.Read != nil {
		pol.read = resolvedPaths(sb.Read)
		if sb.readBound != nil {
			if err := heldWithin("Sandbox.Read", pol.read, sb.readBound, "Read"); err != nil {
				return nil, err
			}
		}
		pol.shell = m.shellPath()
	}
	hide := slices.Clone(sb.Hide)
	if m.cfg.stateDir != "" {
		hide = append(hide, m.cfg.stateDir)
	}
	if m.cfg.logDir != "" {
		hide = append(hide, m.cfg.logDir)
	}
	hide = append(hide, sharedMemoryHidden(pol)...)
	var walk hiddenWalk
	pol.hide, walk = withHiddenLinkTargets(resolvePaths(hide), pol.write, watch)
	pol.unwatched, pol.hardLinked = !walk.watched, walk.linked
	if aliases := hiddenMountAliases(pol.hide); len(aliases) > 0 {
		pol.hide = append(pol.hide, aliases...)
		slices.Sort(pol.hide)
		pol.hide = slices.Compact(pol.hide)
	}
	for _, h := range pol.hide {
		for _, w := range pol.write {
			if !within(h, w) {
				continue
			}
			if link, ok := walk.links[h]; ok {
				return nil, xerrors.Errorf("the link %q in a hidden directory points to %q, inside the writable %q (Sandbox.Write, the work dir or the temp dir): "+
					"a hidden path cannot be taken back from a writable directory; move the file or work elsewhere: %w", link, h, w, ErrInvalidRequest)
			}
			return nil, xerrors.Errorf("Sandbox.Hide %q lies inside the writable %q (Sandbox.Write, the work dir or the temp dir): "+
				"a hidden path cannot be taken back from a writable directory: %w", h, w, ErrInvalidRequest)
		}
	}
	var err error
	if pol.readOnly, err = readOnlyPaths(sb.ReadOnly, pol.write); err != nil {
		return nil, err
	}
	slices.Sort(pol.ports)
	pol.ports = slices.Compact(pol.ports)
	if err := pol.setHosts(sb.AllowHosts); err != nil {
		return nil, err
	}
	pol.skip = m.cfg.sandboxSkip
	pol.key = pol.makeKey()
	return pol, nil
}

// sharedMemoryDir holds the host's POSIX shared memory and semaphores
// (shm_open, sem_open): files every user's processes make in one tmpfs,
// checked by owner and mode alone.
const sharedMemoryDir = "/dev/shm"

// sharedMemoryHidden is sharedMemoryDir where pol reads everything and
// writes nothing there: a tree of the host's user read the host's 0600
// objects (root's, as root), and without a write right no tree could make
// objects there anyway (eleventh attack review,
// TestAttackHostPOSIXSharedMemory). A policy whose Write holds it (for a
// browser or a multiprocessing pool) keeps it whole.
func sharedMemoryHidden(pol *sandboxPolicy) []string {
	if pol.read != nil || slices.ContainsFunc(pol.write, func(w string) bool {
		return within(w, sharedMemoryDir) || within(sharedMemoryDir, w)
	}) {
		return nil
	}
	return []string{sharedMemoryDir}
}

// readOnlyPaths is resolvePaths of ro, each inside one of write
// (resolved). A path whose own entry lies in a writable dir but which is a
// link out of that dir is kept as that entry alone, not its target:
// writes through it reach a target the tree may not write, so it is
// read-only already, and nothing is bound at the target. A tree may make
// such a link where a ReadOnly path does not exist (a missing ws/.git;
// without root .git is writable), and refusing it made every later Start
// of the policy fail (eleventh attack review,
// TestAttackReadOnlyLinkRefusesEveryStart). The entry stays in the
// policy, where the mount layer leaves a link alone but warns of it and
// watches it as a missing path, so that a directory a tree swaps in for
// the link is protected (TestReadOnlyLinkSwappedForDir). A path outside
// every writable dir is the caller's mistake, refused.
func readOnlyPaths(ro, write []string) ([]string, error) {
	in := func(p string) string {
		for _, w := range write {
			if within(p, w) {
				return w
			}
		}
		return ""
	}
	var out []string
	for _, r := range ro {
		res := resolvePath(r)
		entry := filepath.Join(resolvePath(filepath.Dir(r)), filepath.Base(r))
		w := in(entry)
		switch {
		case w != "" && !within(res, w):
			out = append(out, filepath.Clean(r), entry) // a link out of its writable dir
			continue
		case w == "" && in(res) == "":
			return nil, xerrors.Errorf("Sandbox.ReadOnly %q is not inside a writable directory: %w", r, ErrInvalidRequest)
		}
		out = append(out, filepath.Clean(r), res) // as resolvePaths
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// makeKey is a string that differs for every pair of policies the OS layer
// would enforce differently.
func (pol *sandboxPolicy) makeKey() string {
	var b strings.Builder
	list := func(tag string, l []string) {
		b.WriteString(tag)
		b.WriteString(strconv.Itoa(len(l)))
		for _, s := range l {
			b.WriteString("\x00")
			b.WriteString(s)
		}
		b.WriteString("\x01")
	}
	list("w", pol.write)
	if pol.read == nil {
		b.WriteString("r*\x01")
	} else {
		list("r", pol.read)
	}
	list("h", pol.hide)
	list("o", pol.readOnly)
	b.WriteString(string(pol.network))
	for _, p := range pol.ports {
		b.WriteString("," + strconv.Itoa(p))
	}
	b.WriteString("\x01" + pol.hostsKey)
	b.WriteString("\x01" + strconv.FormatBool(pol.tty) + pol.shell + "\x01" + strconv.FormatUint(uint64(pol.skip), 10))
	return b.String()
}

// secretNameParts are the substrings (of an upper-cased name) that make a
// variable look like a secret.
var secretNameParts = []string{
	"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
	"CONNECTION_STRING", "PRIVATE", "COOKIE", "SESSION",
	// A signed token, and a URL whose path is its credential
	// (SLACK_WEBHOOK_URL, DISCORD_WEBHOOK).
	"JWT", "BEARER", "WEBHOOK",
	// Short for credentials (GCP_CREDS), and a wallet's seed phrase, which
	// is its keys (Hardhat's and Truffle's MNEMONIC): eleventh attack
	// review, TestAttackEnvNamesMissed.
	"CREDS", "MNEMONIC", "SEED_PHRASE",
}

// secretWords make a name look like a secret as a whole word between
// underscores only: as substrings they are in innocent names (PASSTHROUGH,
// BYPASS). secretSuffixWords need a word before them too: PWD alone is the
// shell's working directory and PAT and PW (DB_PW) are in no name alone.
var (
	secretWords       = []string{"PASS", "DSN"}
	secretSuffixWords = []string{"PWD", "PAT", "PW"}
)

// secretNames are dropped by name: they point at a credential socket or file.
var secretNames = []string{"SSH_AUTH_SOCK", "DOCKER_HOST", "DOCKER_CONFIG", "KUBECONFIG", "GPG_AGENT_INFO"}

// secretVerdicts caches looksSecret's answers by name: every sandboxed
// Start filters the whole inherited environment, whose names rarely
// change, and upper-cases and searches each name otherwise
// (docs/measurements.md). At most maxSecretVerdicts names are kept (a
// hook may invent names), counted in secretVerdictCount.
var (
	secretVerdicts     sync.Map // string → bool
	secretVerdictCount atomic.Int32
)

const maxSecretVerdicts = 1024

// looksSecret reports whether an environment variable's name looks like it
// holds a secret (see SandboxEnv).
func looksSecret(name string) bool {
	if v, ok := secretVerdicts.Load(name); ok {
		return v.(bool)
	}
	v := nameLooksSecret(name)
	if secretVerdictCount.Add(1) <= maxSecretVerdicts {
		// A copy: name may share its bytes with the variable's value.
		secretVerdicts.Store(strings.Clone(name), v)
	}
	return v
}

// nameLooksSecret is looksSecret without the cache.
func nameLooksSecret(name string) bool {
	u := strings.ToUpper(name)
	if slices.Contains(secretNames, u) {
		return true
	}
	for _, part := range secretNameParts {
		if strings.Contains(u, part) {
			return true
		}
	}
	words := strings.Split(u, "_")
	for i, w := range words {
		if slices.Contains(secretWords, w) || i > 0 && words[i-1] != "" && slices.Contains(secretSuffixWords, w) {
			return true
		}
	}
	// AUTH, but not as the start of AUTHOR (GIT_AUTHOR_NAME); AUTHORITY
	// (XAUTHORITY, the X11 cookie) counts.
	for i := 0; ; {
		j := strings.Index(u[i:], "AUTH")
		if j < 0 {
			return false
		}
		i += j + len("AUTH")
		if !strings.HasPrefix(u[i:], "OR") || strings.HasPrefix(u[i:], "ORITY") {
			return true
		}
	}
}

// matchName reports whether name matches one of patterns (exact, or a
// prefix before a trailing "*").
func matchName(name string, patterns []string) bool {
	for _, p := range patterns {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, pre) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// sandboxEnv filters env (the inherited environment, before the request's
// own variables) by e and sets the temp dir. MarkerEnv and PWD are never
// dropped.
func sandboxEnv(env []string, e SandboxEnv, tmpDir string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		fk := envKeyFold(k)
		if fk == MarkerEnv || fk == "PWD" {
			out = append(out, kv)
			continue
		}
		if matchName(k, e.Drop) || (looksSecret(k) && !matchName(k, e.Keep)) {
			continue
		}
		out = append(out, kv)
	}
	over := make(map[string]string, len(e.Set)+3)
	for k, v := range e.Set {
		over[k] = v
	}
	if tmpDir != "" {
		over["TMPDIR"], over["TMP"], over["TEMP"] = tmpDir, tmpDir, tmpDir
	}
	if len(over) == 0 {
		return out
	}
	return mergeEnv(out, over)
}

// unenforced is one restriction this host cannot enforce: the field it
// comes from and why.
type unenforced struct {
	field, reason string
	// soft restrictions (ReadOnly) warn even without BestEffort.
	soft bool
}

func (u unenforced) String() string { return "Sandbox." + u.field + ": " + u.reason }

// checkUnenforced turns what the OS layer cannot enforce into Start's
// error (a hard restriction without BestEffort) or warnings.
func checkUnenforced(pol *sandboxPolicy, missing []unenforced) ([]string, error) {
	var warnings []string
	for _, u := range missing {
		if !u.soft && !pol.bestEffort {
			return nil, xerrors.Errorf("%s: %w", u, ErrUnsupported)
		}
		warnings = append(warnings, "sandbox: not enforced: "+u.String())
	}
	// Found once per policy, by the hidden-link walk (hardLinked); the
	// other names are not known, so only this one is given.
	for _, p := range pol.hardLinked {
		warnings = append(warnings, "sandbox: Sandbox.Hide: the file "+strconv.Quote(p)+
			" has other hard links, which are not hidden: a tree may read it through another name")
	}
	return warnings, nil
}
