package agentproc_test

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/agentproc/agentproc"
)

// listen listens on a TCP port of 127.0.0.1 chosen by the kernel, prints
// "port=N", and blocks until a signal ends the process; see the registry in
// helper_test.go.
func init() { agentproc.RegisterHelper("listen", helperListen, false) }

// helperListen is the "listen" helper mode.
func helperListen() int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	fmt.Printf("port=%d\n", l.Addr().(*net.TCPAddr).Port)
	time.Sleep(time.Hour) // a server waiting to be signalled, not synchronisation
	return 0
}
