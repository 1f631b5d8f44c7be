package sekka

// Test helpers: real `sekka serve` processes on 127.0.0.1 (ports the kernel picks), and
// scripted RESP servers in the test process.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// sekkaBin is the server binary: $SEKKA_BIN, or the build tree's.
func sekkaBin() string {
	if b := os.Getenv("SEKKA_BIN"); b != "" {
		return b
	}
	return "/work/main/build/cli/sekka"
}

// listenRE reads where a server listens from its first stdout line.
var listenRE = regexp.MustCompile(`HTTP on http://(\S+), Redis protocol on (\S+?)(?:, Thrift on (\S+))? \(worker id (\d+)`)

type testServer struct {
	addr     string // the RESP listener, 127.0.0.1:port
	dir      string
	cmd      *exec.Cmd
	stderr   bytes.Buffer
	drained  chan struct{} // stdout read to its end
	stopOnce sync.Once
}

func needServer(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(sekkaBin()); err != nil {
		t.Skipf("no sekka binary (%v): set SEKKA_BIN", err)
	}
}

// startServer starts `sekka serve` with worker id `worker` in a fresh data dir; it is killed
// by PID at the test's end.
func startServer(t testing.TB, worker int, flags ...string) *testServer {
	return startServerIn(t, t.TempDir(), worker, "127.0.0.1:0", flags...)
}

func startServerIn(t testing.TB, dir string, worker int, resp string, flags ...string) *testServer {
	t.Helper()
	needServer(t)
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--resp", resp, "--data-dir", dir,
		"--worker-source", "static", "--worker-id", strconv.Itoa(worker)}, flags...)
	s := &testServer{dir: dir, cmd: exec.Command(sekkaBin(), args...), drained: make(chan struct{})}
	// Each server is a host of its own (its own worker lock dir).
	s.cmd.Env = append(os.Environ(), "SEKKA_WORKER_LOCK_DIR="+filepath.Join(dir, "host-locks"))
	s.cmd.Stderr = &s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		first <- line
		io.Copy(io.Discard, r) // the server must never block on a full pipe
		close(s.drained)
	}()
	select {
	case line := <-first:
		m := listenRE.FindStringSubmatch(line)
		if m == nil {
			s.kill()
			t.Fatalf("sekka serve %v: first line %q, stderr %q", flags, line, s.stderr.String())
		}
		s.addr = m[2]
	case <-time.After(30 * time.Second):
		s.kill()
		t.Fatalf("sekka serve did not start in 30 s")
	}
	return s
}

// kill stops the server with SIGKILL, by its PID, and reaps it.
func (s *testServer) kill() {
	s.stopOnce.Do(func() {
		s.cmd.Process.Kill()
		<-s.drained
		s.cmd.Wait()
	})
}

// createTag makes segment tag `tag` in the store `store` ("sqlite:PATH").
func createTag(t testing.TB, store, tag string, step int) {
	t.Helper()
	out, err := exec.Command(sekkaBin(), "segment", "create", tag, "--step", strconv.Itoa(step),
		"--start", "1", "--segment-store", store).CombinedOutput()
	if err != nil {
		t.Fatalf("sekka segment create %s: %v: %s", tag, err, out)
	}
}

// workerOf is a snowflake id's worker id (the sekka layout: bits 12..21).
func workerOf(id int64) int { return int(id>>12) & 1023 }

// freeAddr is a 127.0.0.1 address nothing listens on (it did a moment ago).
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// scripted is a RESP server in the test process: each command on each connection goes to
// `answer`, which writes the reply (or nothing) and returns false to close the connection.
type scripted struct {
	addr   string
	ln     net.Listener
	answer func(sc *scriptedConn, args []string) bool
	stop   chan struct{}
	wg     sync.WaitGroup

	mu          sync.Mutex
	conns       []net.Conn
	connections int
	commands    []string
}

type scriptedConn struct {
	net.Conn
	s *scripted
	n int // commands on this connection so far
}

// sleep waits d unless the server stops; false if it stopped.
func (sc *scriptedConn) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-sc.s.stop:
		return false
	}
}

func startScripted(t testing.TB, answer func(sc *scriptedConn, args []string) bool) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{addr: ln.Addr().String(), ln: ln, answer: answer, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *scripted) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.connections++
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(&scriptedConn{Conn: c, s: s})
	}
}

func (s *scripted) serve(sc *scriptedConn) {
	defer s.wg.Done()
	defer sc.Close()
	r := bufio.NewReader(sc)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.commands = append(s.commands, fmt.Sprint(args))
		s.mu.Unlock()
		sc.n++
		if !s.answer(sc, args) {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// readHeader reads a line "<kind><number>\r\n".
func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != kind || line[len(line)-2] != '\r' {
		return 0, fmt.Errorf("bad header %q", line)
	}
	return strconv.Atoi(line[1 : len(line)-2])
}

// count is the number of commands received so far.
func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.commands)
}

func (s *scripted) counts() (connections int, commands []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connections, append([]string(nil), s.commands...)
}

func (s *scripted) close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// idSource hands out consecutive ids from 1<<30 on, a batch at a time, to every connection of
// a scripted server.
type idSource struct {
	mu   sync.Mutex
	next int64
}

func newIDSource() *idSource { return &idSource{next: 1 << 30} }

// reply is the next batch of n ids as a RESP array.
func (s *idSource) reply(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := idsReply(s.next, n)
	s.next += int64(n)
	return r
}

// idsReply is an array of count integers from `from` on.
func idsReply(from int64, count int) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", count)
	for i := 0; i < count; i++ {
		fmt.Fprintf(&b, ":%d\r\n", from+int64(i))
	}
	return b.String()
}
