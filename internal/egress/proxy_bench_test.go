package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// benchProxy runs an origin (serve handles each connection) and a proxy
// that reaches it as allowed.test:443; it returns the origin's and the
// proxy's addresses.
func benchProxy(b *testing.B, serve func(net.Conn)) (origin, proxy string) {
	b.Helper()
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := oln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	b.Cleanup(func() { _ = oln.Close(); <-done })
	fn := &fakeNet{names: map[string][]netip.Addr{"allowed.test": {originAddr}},
		origins: map[uint16]string{443: oln.Addr().String()}}
	l, err := ParseList([]string{"allowed.test"})
	if err != nil {
		b.Fatal(err)
	}
	p := New(Config{Resolver: fn, Dial: fn.dial, AddrFilter: &AddrFilter{LocalAddrs: func() ([]netip.Addr, error) { return nil, nil }}})
	b.Cleanup(func() { _ = p.Close() })
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.Serve(pln, Policy{List: l}); err != nil {
		b.Fatal(err)
	}
	return oln.Addr().String(), pln.Addr().String()
}

// dialVia opens a connection to the origin, directly or by a CONNECT
// through proxy.
func dialVia(b *testing.B, origin, proxy string) (net.Conn, io.Reader) {
	if proxy == "" {
		c, err := net.Dial("tcp", origin)
		if err != nil {
			b.Fatal(err)
		}
		return c, c
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c, br
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkProxyConnect measures connection setup, direct and through a
// CONNECT tunnel, alternated in one run: from the dial to the first byte
// the origin sends (a server that speaks first, so the tunnel's whole
// setup, the proxy's checks and its own dial included, is on the clock).
// added-µs is the proxy's median minus the direct one.
func BenchmarkProxyConnect(b *testing.B) {
	origin, proxy := benchProxy(b, func(c net.Conn) { _, _ = c.Write([]byte("x")); _, _ = io.Copy(io.Discard, c) })
	var direct, via []time.Duration
	one := func(p string, into *[]time.Duration) {
		start := time.Now()
		c, r := dialVia(b, origin, p)
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
		_ = c.Close()
	}
	for b.Loop() {
		one("", &direct)
		one(proxy, &via)
	}
	md, mp := median(direct), median(via)
	b.ReportMetric(float64(md.Microseconds()), "direct-µs")
	b.ReportMetric(float64(mp.Microseconds()), "proxy-µs")
	b.ReportMetric(float64((mp - md).Microseconds()), "added-µs")
}

// BenchmarkProxyDownload downloads 100 MiB, directly and through a CONNECT
// tunnel, alternated in one run; throughput-ratio is the proxy's median
// throughput over the direct one. cpu-ratio is the process's CPU time for
// a download through the proxy (the origin's, the proxy's and the
// client's, all in this process) over a direct one's, medians. Where
// every core is busy, throughput-ratio tends to its inverse; where one is
// idle, the proxy's copy runs there and throughput-ratio is higher.
func BenchmarkProxyDownload(b *testing.B) {
	const size = 100 << 20
	chunk := make([]byte, 256<<10)
	origin, proxy := benchProxy(b, func(c net.Conn) {
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	var direct, via, directCPU, viaCPU []time.Duration
	one := func(p string, into, intoCPU *[]time.Duration) {
		cpu0, cpuOK := processCPU()
		start := time.Now()
		c, r := dialVia(b, origin, p)
		n, err := io.Copy(io.Discard, r)
		if err != nil || n != size {
			b.Fatalf("got %d bytes, %v; want %d", n, err, size)
		}
		*into = append(*into, time.Since(start))
		_ = c.Close()
		if cpu1, ok := processCPU(); cpuOK && ok {
			*intoCPU = append(*intoCPU, cpu1-cpu0)
		}
	}
	b.SetBytes(2 * size)
	for b.Loop() {
		one("", &direct, &directCPU)
		one(proxy, &via, &viaCPU)
	}
	md, mp := median(direct), median(via)
	b.ReportMetric(size/md.Seconds()/(1<<20), "direct-MiB/s")
	b.ReportMetric(size/mp.Seconds()/(1<<20), "proxy-MiB/s")
	b.ReportMetric(md.Seconds()/mp.Seconds(), "throughput-ratio")
	if len(viaCPU) > 0 && len(directCPU) > 0 && median(directCPU) > 0 {
		b.ReportMetric(median(viaCPU).Seconds()/median(directCPU).Seconds(), "cpu-ratio")
	}
}
