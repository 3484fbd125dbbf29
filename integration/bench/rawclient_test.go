package bench

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawClient is a keep-alive HTTP/1.1 client that writes a request and
// reads its answer on the caller's goroutine, as curl, Python's
// http.client and load generators such as wrk do. Go's http.Client hands
// every request to a write-loop goroutine and every answer back from a
// read-loop goroutine: two more hand-offs per request, each of which can
// wake a sleeping CPU, that are the client's cost and not the router's.
// The benchmarks report both.
type rawClient struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func newRawClient(b *testing.B, url string) *rawClient {
	addr := strings.TrimPrefix(url, "http://")
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	c := &rawClient{addr: addr}
	c.dial(b)
	b.Cleanup(func() { c.conn.Close() })
	return c
}

func (c *rawClient) dial(b *testing.B) {
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		b.Fatal(err)
	}
	c.conn, c.r, c.w = conn, bufio.NewReader(conn), bufio.NewWriter(conn)
}

// do sends one request and reads the whole answer; it fails b on a
// status of 300 or more.
func (c *rawClient) do(b *testing.B, method, path, body string) {
	fmt.Fprintf(c.w, "%s %s HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\nContent-Length: %d\r\n", method, path, c.addr, key, len(body))
	if body != "" {
		c.w.WriteString("Content-Type: application/json\r\n")
	}
	c.w.WriteString("\r\n")
	c.w.WriteString(body)
	if err := c.w.Flush(); err != nil {
		b.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		b.Fatal(err)
	}
	drain(b, resp, method+" "+path)
	if resp.Close {
		c.conn.Close()
		c.dial(b)
	}
}
