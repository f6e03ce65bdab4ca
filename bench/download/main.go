// Command download is the Go helper of bench/download.sh (stdlib only): the
// download server of issue 12, whose clients fetch a file and its .md5 and
// check the sum, while new files replace old ones.
//
//	download -mode gen -dir DIR [-n 200] [-size 2099200]
//	    Writes N files DIR/bin/fNNNNNN.bin of -size bytes and, beside hard
//	    links of them, their md5sum files in DIR/all (the nginx root). Every
//	    file starts with a line naming it ("cairn-download-bench fNNNNNN.bin
//	    ..."), then pseudo-random bytes seeded by its name, so that a reader
//	    can tell a file's bytes from another's.
//
//	download -mode read -url BASE -names FILE [-clients 5] [-duration 20s]
//	         [-write URL -key KEY -rate 10 -size 2099200] [-names-out FILE]
//	         [-cpuprofile FILE]
//	    Runs -clients readers for -duration: each picks a random live file,
//	    GETs BASE/NAME and BASE/NAME.md5, and checks that the body names
//	    NAME in its first line and that its MD5 is the sidecar's. With
//	    -write, a writer adds new files through that node (PUT, Bearer -key)
//	    and deletes the oldest ones at -rate files/s, both ways (up to 4
//	    add-and-delete cycles at once, so the rate holds): a new file
//	    joins the readers' choice once -url serves it, and a file leaves it
//	    before its DELETE, which waits until no reader is fetching it.
//	    -names-out writes the live names at the end (the -names of the next
//	    run after churn). Prints one "DOWNLOAD" line: files/s and MB/s read,
//	    errors, bad bodies, and the writer's puts, deletes and errors.
//
// Every loop is bounded in count and time; every request has a timeout.
package main

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() { os.Exit(run()) }

// errFailed: the run saw errors or bad bodies (its DOWNLOAD line says how many).
var errFailed = errors.New("errors or bad bodies")

func run() int {
	mode := flag.String("mode", "", "gen or read")
	dir := flag.String("dir", "", "gen: corpus directory")
	n := flag.Int("n", 200, "gen: files")
	size := flag.Int("size", 2050*1024, "file size in bytes (gen, and the writer's new files)")
	base := flag.String("url", "", "read: base URL of the files (http://HOST:PORT/BUCKET)")
	names := flag.String("names", "", "read: file of the names to read, one a line")
	clients := flag.Int("clients", 5, "read: concurrent readers")
	duration := flag.Duration("duration", 20*time.Second, "read: how long")
	write := flag.String("write", "", "read: base URL to write new files through (churn); empty: no writer")
	key := flag.String("key", "", "read: admin key for the writer")
	rate := flag.Float64("rate", 10, "read: files added and deleted per second by the writer")
	namesOut := flag.String("names-out", "", "read: write the live names at the end to this file (the -names of a later run after churn)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "download:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var err error
	switch *mode {
	case "gen":
		err = gen(*dir, *n, *size)
	case "read":
		err = read(*base, *names, *namesOut, *clients, *duration, *write, *key, *rate, *size)
	default:
		err = fmt.Errorf("-mode gen or read")
	}
	switch {
	case errors.Is(err, errFailed):
		return 2
	case err != nil:
		fmt.Fprintln(os.Stderr, "download:", err)
		return 1
	}
	return 0
}

// content returns the bytes of file name: a first line naming it, then
// pseudo-random bytes seeded by the name.
func content(name string, size int) []byte { return fill(make([]byte, size), name) }

// fill writes file name's bytes (see content) into b, all of it, and
// returns b. The writer reuses one buffer: its cost in the clients' CPU,
// which the readers share, stays small.
func fill(b []byte, name string) []byte {
	n := copy(b, fmt.Sprintf("cairn-download-bench %s %d\n", name, len(b)))
	var seed [8]byte
	copy(seed[:], name)
	r := rand.New(rand.NewPCG(uint64(len(name)), binary.LittleEndian.Uint64(seed[:])))
	i := n
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for v := r.Uint64(); i < len(b); i, v = i+1, v>>8 {
		b[i] = byte(v)
	}
	return b
}

func md5Line(name string, data []byte) string {
	s := md5.Sum(data)
	return hex.EncodeToString(s[:]) + "  " + name + "\n"
}

func gen(dir string, n, size int) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	for _, d := range []string{"bin", "all"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	list, err := os.Create(filepath.Join(dir, "names.txt"))
	if err != nil {
		return err
	}
	defer list.Close()
	for i := range n {
		name := fmt.Sprintf("f%06d.bin", i)
		data := content(name, size)
		p := filepath.Join(dir, "bin", name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		all := filepath.Join(dir, "all", name)
		_ = os.Remove(all)
		if err := os.Link(p, all); err != nil {
			return err
		}
		if err := os.WriteFile(all+".md5", []byte(md5Line(name, data)), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(list, name)
	}
	return nil
}

// live is the set of names readers choose from, with the readers in
// flight per name (a name is deleted only when none fetches it).
type live struct {
	mu       sync.Mutex
	names    []string
	inFlight map[string]int
	idle     *sync.Cond
}

func (l *live) pick(r *rand.Rand) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := l.names[r.IntN(len(l.names))]
	l.inFlight[name]++
	return name
}

func (l *live) done(name string) {
	l.mu.Lock()
	if l.inFlight[name]--; l.inFlight[name] == 0 {
		delete(l.inFlight, name)
		l.idle.Broadcast()
	}
	l.mu.Unlock()
}

// retire takes the oldest name out of the choice and waits until no reader
// fetches it.
func (l *live) retire() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := l.names[0]
	l.names = l.names[1:]
	for l.inFlight[name] > 0 {
		l.idle.Wait()
	}
	return name
}

func (l *live) add(name string) {
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

func read(base, namesFile, namesOut string, clients int, d time.Duration, write, key string, rate float64, size int) error {
	if base == "" || namesFile == "" {
		return fmt.Errorf("-url and -names are required")
	}
	f, err := os.Open(namesFile)
	if err != nil {
		return err
	}
	l := &live{inFlight: map[string]int{}}
	l.idle = sync.NewCond(&l.mu)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			l.names = append(l.names, s)
		}
	}
	f.Close()
	if len(l.names) < 2 {
		return fmt.Errorf("%s: fewer than 2 names", namesFile)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients + 4, DisableCompression: true}}
	deadline := time.Now().Add(d)
	var files, bytesRead, errs, bad atomic.Int64
	var firstErr atomic.Value
	note := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	get := func(url string, buf *bytes.Buffer) error {
		buf.Reset()
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			io.Copy(io.Discard, resp.Body)
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		_, err = buf.ReadFrom(resp.Body)
		return err
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 42))
			var body, sum bytes.Buffer
			for time.Now().Before(deadline) {
				name := l.pick(r)
				err := get(base+"/"+name, &body)
				if err == nil {
					err = get(base+"/"+name+".md5", &sum)
				}
				l.done(name)
				if err != nil {
					note(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				b := body.Bytes()
				if !bytes.HasPrefix(b, []byte("cairn-download-bench "+name+" ")) || md5Line(name, b) != sum.String() {
					bad.Add(1)
					firstErr.CompareAndSwap(nil, "bad body or sum for "+name)
					continue
				}
				files.Add(1)
				bytesRead.Add(int64(len(b) + sum.Len()))
			}
		}()
	}
	var puts, dels, werrs atomic.Int64
	if write != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			churn(hc, l, write, base, key, rate, size, deadline, &puts, &dels, &werrs, &firstErr)
		}()
	}
	start := time.Now()
	wg.Wait()
	secs := time.Since(start).Seconds()
	fe, _ := firstErr.Load().(string)
	fmt.Printf("DOWNLOAD clients=%d secs=%.1f files=%d files_per_s=%.1f mb_per_s=%.1f errors=%d bad=%d puts=%d deletes=%d write_errors=%d first_error=%q\n",
		clients, secs, files.Load(), float64(files.Load())/secs, float64(bytesRead.Load())/secs/1e6,
		errs.Load(), bad.Load(), puts.Load(), dels.Load(), werrs.Load(), fe)
	if namesOut != "" {
		if err := os.WriteFile(namesOut, []byte(strings.Join(l.names, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	if errs.Load() > 0 || bad.Load() > 0 || werrs.Load() > 0 {
		return errFailed
	}
	return nil
}

// churnWriters is how many of the writer's add-and-delete cycles may be in
// flight: one at a time falls behind -rate when a cycle takes longer than
// 1/rate under load.
const churnWriters = 4

// churn adds a new file and deletes the oldest one rate times a second
// until deadline: cycle i is due at i/rate seconds from the start, and up
// to churnWriters cycles run at once, so that a slow cycle delays no other
// and the rate holds on average (a late cycle starts as soon as a writer
// is free).
func churn(hc *http.Client, l *live, write, read, key string, rate float64, size int, deadline time.Time,
	puts, dels, errs *atomic.Int64, firstErr *atomic.Value) {
	run := time.Now().UnixNano()
	do := func(method, url string, body []byte) error {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %s", method, url, resp.Status)
		}
		return nil
	}
	fail := func(err string) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	cycle := func(buf []byte, i int) []byte {
		name := fmt.Sprintf("n%d-%06d.bin", run, i) // unique across runs
		if err := do(http.MethodPut, write+"/"+name, fill(buf, name)); err != nil {
			fail(err.Error())
			return make([]byte, size) // the transport may still read the old one
		}
		puts.Add(1)
		// Readers read through another node: the file joins their choice
		// once that node has it (milliseconds).
		for seen := time.Now().Add(5 * time.Second); ; {
			resp, err := hc.Head(read + "/" + name)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(seen) {
				fail("not visible through the readers' node within 5 s: " + name)
				break
			}
			time.Sleep(time.Millisecond)
		}
		l.add(name)
		old := l.retire()
		if err := do(http.MethodDelete, write+"/"+old, nil); err != nil {
			fail(err.Error())
			return buf
		}
		dels.Add(1)
		return buf
	}
	due := make(chan int, 1024)
	var wg sync.WaitGroup
	for range churnWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for i := range due {
				buf = cycle(buf, i)
			}
		}()
	}
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if !at.Before(deadline) {
			break
		}
		time.Sleep(time.Until(at))
		due <- i
	}
	close(due)
	wg.Wait()
}
