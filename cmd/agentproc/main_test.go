package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentproc/agentproc/internal/testleak"
)

// Environment variables that make the test binary something else (the
// helper-process pattern): agentproc itself, a TCP server that says what it
// does, or a client of one.
const (
	// runMainEnv makes the test binary run agentproc with its arguments.
	runMainEnv = "AGENTPROC_TEST_RUN_MAIN"
	// listenEnv makes it listen on 127.0.0.1 at the port it names, print
	// "listening on ADDR", then "accepted" for each connection.
	listenEnv = "AGENTPROC_TEST_LISTEN"
	// dialEnv makes it connect to the port it names, print "dialed" and
	// exit.
	dialEnv = "AGENTPROC_TEST_DIAL"
	// unixDialEnv makes it connect to the Unix socket it names and exit
	// at once, without writing.
	unixDialEnv = "AGENTPROC_TEST_UNIX_DIAL"
	// pidFileEnv makes it write its PID and a newline to the file it
	// names, then wait to be killed: a process left running, found by PID,
	// where the shell cannot say its own PID (cmd.exe).
	pidFileEnv = "AGENTPROC_TEST_PIDFILE"
)

func TestMain(m *testing.M) {
	if port := os.Getenv(listenEnv); port != "" {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("listening on", l.Addr())
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			fmt.Println("accepted")
			c.Close()
		}
	}
	if port := os.Getenv(dialEnv); port != "" {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c.Close()
		fmt.Println("dialed")
		os.Exit(0)
	}
	if path := os.Getenv(unixDialEnv); path != "" {
		if _, err := net.Dial("unix", path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	if path := os.Getenv(pidFileEnv); path != "" {
		if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		<-time.After(time.Hour) // until killed; an hour bounds a leak
		os.Exit(3)
	}
	// Last: the helpers above run under agentproc, whose environment
	// they inherit.
	if os.Getenv(runMainEnv) != "" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(leakChecked{m})
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// leakChecked runs the tests, then fails the run if a process they started
// is still alive (internal/testleak), killing it.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	run := testleak.Mark()
	code := l.m.Run()
	if leaks := testleak.Check(run, 5*time.Second); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, testleak.Report(leaks))
		testleak.Kill(run, leaks)
		code = 1
	}
	return code
}
