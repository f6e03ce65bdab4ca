// Command propagate is the Go helper of bench/cluster.sh (stdlib only). It
// talks to Cairn nodes on loopback over HTTP and measures two things:
//
//	propagate -mode prop -write URL -poll URL,URL -bucket B [-n 500] [-size 1024]
//	    Writes N files, one at a time, through the -write node. As soon as a
//	    PUT is acknowledged it polls every -poll node with HEAD in a tight
//	    loop (one goroutine per node, keep-alive) until the file answers 200
//	    or -deadline passes, and records the delay from the acknowledgement
//	    to the arrival of the first 200 (an upper bound: it includes that
//	    HEAD's round trip). Prints one "PROP" line per polled node with
//	    p50/p99/max in ms, and "PUT" with the PUT latencies.
//
//	propagate -mode prop -dir MOUNTDIR -poll URL,URL -bucket B [-n 500] [-size 1024]
//	    The same, each file written through a POSIX mount of bucket B
//	    (MOUNTDIR is the mount's root): create, write, close, no fsync.
//	    The delay runs from close's return (the "PUT" line then gives the
//	    latency of the create-write-close). This is the visibility bound of
//	    the mount's mode (docs/operations.md, "Mount modes").
//
//	propagate -mode failover -write URL -read URL -bucket B -pid PID -signal KILL|STOP
//	    Preloads -preload files through -write, then runs -writers
//	    sequential PUT loops through -write and -readers GET loops of the
//	    preloaded files through -read. After -before it sends the signal to
//	    PID (a node the calling script started), keeps the load for -after,
//	    then (for STOP) sends SIGCONT and keeps it -tail more. Prints a
//	    "FAILOVER" line: the longest interval between two consecutive
//	    successful write acknowledgements that spans or follows the signal
//	    (gap_ms), the time from the signal to the first write acknowledged
//	    after it (first_ok_ms), write errors, read count, read failures and
//	    read p50/p99/max.
//
// Every loop is bounded in count and time; every request has a timeout.
package main

import (
	"bytes"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	mode     = flag.String("mode", "prop", "prop or failover")
	writeURL = flag.String("write", "", "base URL of the node that takes the writes")
	writeDir = flag.String("dir", "", "prop: write through this mount of -bucket (its root) instead of -write")
	pollURLs = flag.String("poll", "", "prop: comma-separated base URLs polled for visibility")
	names    = flag.String("names", "", "prop: comma-separated names of the polled nodes (default: their URLs)")
	readURL  = flag.String("read", "", "failover: base URL reads go through")
	bucket   = flag.String("bucket", "prop", "bucket (must exist)")
	prefix   = flag.String("prefix", "p", "path prefix of the files written")
	n        = flag.Int("n", 500, "prop: files to write")
	size     = flag.Int("size", 1024, "bytes per file")
	deadline = flag.Duration("deadline", 5*time.Second, "prop: give up polling a file after this long")
	key      = flag.String("key", os.Getenv("CAIRN_ADMIN_KEY"), "admin key")
	csvOut   = flag.String("csv", "", "prop: write one line per file and node (node,i,delay_ms) here")

	pid      = flag.Int("pid", 0, "failover: process to signal")
	sigName  = flag.String("signal", "KILL", "failover: KILL or STOP")
	before   = flag.Duration("before", 3*time.Second, "failover: load before the signal")
	after    = flag.Duration("after", 10*time.Second, "failover: load after the signal")
	tail     = flag.Duration("tail", 3*time.Second, "failover: load after SIGCONT (STOP only)")
	writers  = flag.Int("writers", 4, "failover: parallel write loops")
	readers  = flag.Int("readers", 2, "failover: parallel read loops")
	preload  = flag.Int("preload", 200, "failover: files written before the load, read during it")
	reqTO    = flag.Duration("timeout", 2*time.Second, "failover: timeout of each write request")
	readTO   = flag.Duration("read-timeout", 5*time.Second, "failover: timeout of each read request")
	maxWrite = flag.Int("max-writes", 200000, "failover: bound on writes per loop")
)

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "propagate: "+f+"\n", a...)
	os.Exit(1)
}

func newClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

func put(c *http.Client, base, path string, body []byte) error {
	req, err := http.NewRequest("PUT", base+"/"+*bucket+"/"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+*key)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		return fmt.Errorf("PUT %s: %s", path, resp.Status)
	}
	return nil
}

// get fetches path and checks its length; method HEAD or GET.
func fetch(c *http.Client, method, base, path string, want int) (int, error) {
	req, err := http.NewRequest(method, base+"/"+*bucket+"/"+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+*key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	m, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, err
	}
	if method == "GET" && resp.StatusCode == 200 && int(m) != want {
		return resp.StatusCode, fmt.Errorf("GET %s: %d bytes, want %d", path, m, want)
	}
	return resp.StatusCode, nil
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func randBody() []byte {
	b := make([]byte, *size)
	rand.Read(b)
	return b
}

func runProp() {
	polls := strings.Split(*pollURLs, ",")
	labels := polls
	if *names != "" {
		labels = strings.Split(*names, ",")
		if len(labels) != len(polls) {
			fatal("-names has %d entries, -poll %d", len(labels), len(polls))
		}
	}
	wc := newClient(10 * time.Second)
	pcs := make([]*http.Client, len(polls))
	for i := range polls {
		pcs[i] = newClient(2 * time.Second)
	}
	var csv *os.File
	if *csvOut != "" {
		f, err := os.Create(*csvOut)
		if err != nil {
			fatal("%v", err)
		}
		defer f.Close()
		csv = f
		fmt.Fprintln(csv, "node,i,delay_ms,polls")
	}
	delays := make([][]float64, len(polls))
	missed := make([]int, len(polls))
	var putLat []float64
	body := randBody()
	via := *writeURL
	if *writeDir != "" {
		via = *writeDir
		if err := os.MkdirAll(*writeDir+"/"+*prefix, 0o755); err != nil {
			fatal("%v", err)
		}
	}
	for i := 0; i < *n; i++ {
		path := fmt.Sprintf("%s/f%05d.bin", *prefix, i)
		body[0], body[1] = byte(i), byte(i>>8)
		t0 := time.Now()
		var err error
		if *writeDir != "" {
			err = os.WriteFile(*writeDir+"/"+path, body, 0o644) // no fsync: the mode's bound
		} else {
			err = put(wc, *writeURL, path, body)
		}
		if err != nil {
			fatal("file %d: %v", i, err)
		}
		ack := time.Now()
		putLat = append(putLat, ms(ack.Sub(t0)))
		var wg sync.WaitGroup
		got := make([]time.Duration, len(polls))
		tries := make([]int, len(polls))
		for j := range polls {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				end := ack.Add(*deadline)
				for time.Now().Before(end) {
					tries[j]++
					st, err := fetch(pcs[j], "HEAD", polls[j], path, 0)
					if err == nil && st == 200 {
						got[j] = time.Since(ack)
						return
					}
					if err == nil && st != 404 {
						fatal("HEAD %s via %s: status %d", path, polls[j], st)
					}
				}
				got[j] = -1
			}(j)
		}
		wg.Wait()
		for j := range polls {
			if got[j] < 0 {
				missed[j]++
				fmt.Fprintf(os.Stderr, "propagate: %s not visible via %s within %v\n", path, labels[j], *deadline)
				continue
			}
			delays[j] = append(delays[j], ms(got[j]))
			if csv != nil {
				fmt.Fprintf(csv, "%s,%d,%.3f,%d\n", labels[j], i, ms(got[j]), tries[j])
			}
		}
	}
	sort.Float64s(putLat)
	fmt.Printf("PUT via=%s n=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", via, len(putLat), pct(putLat, 50), pct(putLat, 99), putLat[len(putLat)-1])
	for j := range polls {
		d := delays[j]
		sort.Float64s(d)
		mx := math.NaN()
		if len(d) > 0 {
			mx = d[len(d)-1]
		}
		fmt.Printf("PROP node=%s n=%d missed=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", labels[j], len(d), missed[j], pct(d, 50), pct(d, 99), mx)
	}
}

func runFailover() {
	if *pid <= 0 {
		fatal("-pid is required")
	}
	var sig syscall.Signal
	switch *sigName {
	case "KILL":
		sig = syscall.SIGKILL
	case "STOP":
		sig = syscall.SIGSTOP
	default:
		fatal("-signal must be KILL or STOP")
	}
	body := randBody()
	pc := newClient(10 * time.Second)
	var paths []string
	for i := 0; i < *preload; i++ {
		p := fmt.Sprintf("%s/pre/f%05d.bin", *prefix, i)
		if err := put(pc, *writeURL, p, body); err != nil {
			fatal("preload: %v", err)
		}
		paths = append(paths, p)
	}
	// Every preloaded file must be readable through the read node first.
	rc := newClient(*readTO)
	for _, p := range paths {
		ok := false
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if st, err := fetch(rc, "GET", *readURL, p, len(body)); err == nil && st == 200 {
				ok = true
				break
			}
		}
		if !ok {
			fatal("preloaded %s not readable via %s", p, *readURL)
		}
	}

	var mu sync.Mutex
	var okTimes []time.Time
	var writeErrs int
	var errSamples []string
	var readLat []float64
	var readFail int
	var readFailSamples []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wcli := newClient(*reqTO)
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < *maxWrite; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := put(wcli, *writeURL, fmt.Sprintf("%s/w%d/f%06d.bin", *prefix, w, i), body)
				now := time.Now()
				mu.Lock()
				if err == nil {
					okTimes = append(okTimes, now)
				} else {
					writeErrs++
					if len(errSamples) < 5 {
						errSamples = append(errSamples, now.Format("15:04:05.000")+" "+err.Error())
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(w)
	}
	for r := 0; r < *readers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; i < 10_000_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := paths[(i*7919+r*104729)%len(paths)]
				t0 := time.Now()
				st, err := fetch(rc, "GET", *readURL, p, len(body))
				d := ms(time.Since(t0))
				mu.Lock()
				readLat = append(readLat, d)
				if err != nil || st != 200 {
					readFail++
					if len(readFailSamples) < 5 {
						readFailSamples = append(readFailSamples, fmt.Sprintf("%s status=%d err=%v", p, st, err))
					}
				}
				mu.Unlock()
			}
		}(r)
	}
	start := time.Now()
	time.Sleep(*before)
	tsig := time.Now()
	if err := syscall.Kill(*pid, sig); err != nil {
		close(stop)
		wg.Wait()
		fatal("kill -%s %d: %v", *sigName, *pid, err)
	}
	time.Sleep(*after)
	var tcont time.Time
	if sig == syscall.SIGSTOP {
		tcont = time.Now()
		if err := syscall.Kill(*pid, syscall.SIGCONT); err != nil {
			fmt.Fprintf(os.Stderr, "propagate: SIGCONT %d: %v\n", *pid, err)
		}
		time.Sleep(*tail)
	}
	end := time.Now()
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(okTimes, func(i, j int) bool { return okTimes[i].Before(okTimes[j]) })
	// Longest gap between consecutive acknowledgements, among those that end
	// after the signal (the last one before the signal starts the gap).
	last := start
	var gap time.Duration
	var firstAfter time.Time
	okBefore, okAfter := 0, 0
	for _, t := range okTimes {
		if t.After(tsig) {
			okAfter++
			if firstAfter.IsZero() {
				firstAfter = t
			}
			if g := t.Sub(last); g > gap {
				gap = g
			}
		} else {
			okBefore++
		}
		last = t
	}
	if okAfter == 0 {
		gap = end.Sub(last)
	} else if g := end.Sub(last); g > gap {
		gap = g // no write succeeded at the end of the run
	}
	firstOK := "none"
	if !firstAfter.IsZero() {
		firstOK = fmt.Sprintf("%.0f", ms(firstAfter.Sub(tsig)))
	}
	sort.Float64s(readLat)
	contMs := "-"
	if !tcont.IsZero() {
		contMs = fmt.Sprintf("%.0f", ms(tcont.Sub(tsig)))
	}
	fmt.Printf("FAILOVER signal=%s gap_ms=%.0f first_ok_ms=%s writes_before=%d writes_after=%d write_errors=%d reads=%d read_failures=%d read_p50_ms=%.2f read_p99_ms=%.2f read_max_ms=%.2f cont_at_ms=%s run_s=%.1f\n",
		*sigName, ms(gap), firstOK, okBefore, okAfter, writeErrs, len(readLat), readFail,
		pct(readLat, 50), pct(readLat, 99), pct(readLat, 100), contMs, end.Sub(start).Seconds())
	for _, s := range errSamples {
		fmt.Fprintf(os.Stderr, "propagate: write error: %s\n", s)
	}
	for _, s := range readFailSamples {
		fmt.Fprintf(os.Stderr, "propagate: read failure: %s\n", s)
	}
}

func main() {
	flag.Parse()
	if *writeURL == "" && (*mode != "prop" || *writeDir == "") {
		fatal("-write is required (or, with -mode prop, -dir)")
	}
	switch *mode {
	case "prop":
		if *pollURLs == "" {
			fatal("-poll is required")
		}
		runProp()
	case "failover":
		if *readURL == "" {
			fatal("-read is required")
		}
		runFailover()
	default:
		fatal("unknown -mode %q", *mode)
	}
}
