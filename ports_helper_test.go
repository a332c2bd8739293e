package agentproc_test

import (
	"fmt"
	"net"
	"os"
	"time"
)

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
