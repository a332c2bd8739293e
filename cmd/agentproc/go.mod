module github.com/agentproc/agentproc/cmd/agentproc

go 1.26.0

require (
	github.com/agentproc/agentproc v0.0.0-00010101000000-000000000000
	github.com/creack/pty v1.1.24
	github.com/modelcontextprotocol/go-sdk v1.8.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	cdr.dev/slog/v3 v3.0.0-rc1 // indirect
	github.com/coder/quartz v0.3.1 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.opentelemetry.io/otel v1.16.0 // indirect
	go.opentelemetry.io/otel/trace v1.16.0 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da // indirect
	mvdan.cc/sh/v3 v3.14.1 // indirect
)

// The command is built against the library in this repository. A release
// tags cmd/agentproc/vX.Y.Z with this line removed and the requirement above
// set to the library's tag of the same commit (see the README's "Install"),
// so go install ...@latest never reads it.
replace github.com/agentproc/agentproc => ../..
