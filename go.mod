module github.com/agentproc/agentproc

go 1.26.0

require (
	cdr.dev/slog/v3 v3.0.0-rc1
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/coder/quartz v0.3.1
	github.com/creack/pty v1.1.24
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	go.opentelemetry.io/otel v1.16.0 // indirect
	go.opentelemetry.io/otel/trace v1.16.0 // indirect
)
