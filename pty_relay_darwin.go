package agentproc

// ptyRelay is true on darwin: a non-blocking /dev/ptmx master registered
// with kqueue is known to spin at full CPU or return EAGAIN
// (golang/go#22099, creack/pty#52 and #174), so the master stays blocking
// and the output is relayed (see relayMaster).
var ptyRelay = true
