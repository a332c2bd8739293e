package agentproc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentproc/agentproc"
)

func ExampleNew() {
	m := agentproc.New(
		agentproc.WithOutputLimits(8<<10, 8<<10, 1024),
		agentproc.WithGracePeriod(2*time.Second),
		agentproc.WithMaxRunning(32),
	)
	// Close stops whatever is still running and waits for it.
	defer m.Close()

	p, err := m.Start(context.Background(), agentproc.Request{Command: "echo hello"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	info, _ := p.Wait(context.Background())
	fmt.Println("exit code:", *info.ExitCode)
	// Output: exit code: 0
}

func ExampleManager_Start() {
	m := agentproc.New()
	defer m.Close()

	_, err := m.Start(context.Background(), agentproc.Request{Command: "   "})
	fmt.Println(errors.Is(err, agentproc.ErrInvalidRequest))

	p, err := m.Start(context.Background(), agentproc.Request{Command: "exit 3"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	info, _ := p.Wait(context.Background())
	// A non-zero exit is process state, not an error.
	fmt.Println("exit code:", *info.ExitCode, "reason:", info.Reason)
	// Output:
	// true
	// exit code: 3 reason: exited
}

func ExampleProcess_Wait() {
	m := agentproc.New()
	defer m.Close()

	p, err := m.Start(context.Background(), agentproc.Request{Command: "echo done"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	// Every wait has a way out: when ctx ends, Wait returns the current
	// state and ctx.Err(), and the process keeps running.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := p.Wait(ctx)
	fmt.Println(info.Running, err)
	// Output: false <nil>
}

func ExampleManager_Scope() {
	m := agentproc.New()
	defer m.Close()

	alice, bob := m.Scope("alice"), m.Scope("bob")
	p, err := alice.Start(context.Background(), agentproc.Request{Command: "echo hi"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_, err = bob.Get(p.ID())
	fmt.Println("bob sees alice's process:", !errors.Is(err, agentproc.ErrNotFound))
	fmt.Println("alice's processes:", len(alice.List()))
	_, _ = p.Wait(context.Background())
	// Output:
	// bob sees alice's process: false
	// alice's processes: 1
}

func ExampleManager_Shutdown() {
	m := agentproc.New()
	ctx := context.Background()
	p, err := m.Start(ctx, agentproc.Request{Command: "echo serving"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	// A bounded graceful stop: every running process gets terminate and the
	// grace period, but if the deadline passes first everything is killed
	// at once and Shutdown returns ctx.Err().
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Shutdown(stopCtx); err != nil {
		fmt.Println("shutdown:", err)
	}
	info, _ := p.Wait(ctx)
	fmt.Println("running:", info.Running)
	_, err = m.Start(ctx, agentproc.Request{Command: "echo late"})
	fmt.Println(errors.Is(err, agentproc.ErrClosed))
	// Output:
	// running: false
	// true
}
