package e2e

// The linearizability check of the namespace under faults: a recorder of
// client operations (call and return times on the monotonic clock) and a
// porcupine model of one path as a register.
//
// Operations, on a bucket of a few "history keys":
//
//   - put K=V: PUT /BUCKET/K with a body that encodes V (a unique tag);
//     201 says K did not exist, 200 that it was replaced (both are decided by
//     the applied command, so they are part of what is checked).
//   - delete K: DELETE /BUCKET/K; 204 says K existed, 404 that it did not.
//   - get K: GET /BUCKET/K?consistent=1 (the linearizable read); 200 with V
//     or 404.
//
// An operation whose outcome is unknown (transport error, client timeout,
// 5xx, any unexpected status) may or may not have taken effect: a put or a
// delete is kept with its return time moved to the end of the history (it
// may be linearized anywhere after its call); an unknown get says nothing and
// is dropped. Plain reads (no ?consistent) are not linearizable by design
// (read-your-writes on one node, eventually consistent elsewhere) and are not
// part of the porcupine history; checkPlainReads applies a weaker check to
// them: every value a plain read returns was written to that path by a put
// called before the read returned (no invented, torn or misplaced values).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

type histInput struct {
	Op    string // "put", "delete", "get"
	Key   string
	Value string // put: the tag written
}

type histOutput struct {
	Status  int    // 200/201 put, 204/404 delete, 200/404 get
	Value   string // get 200: the tag read
	Unknown bool   // put/delete with an unknown outcome
}

// regState is the model state of one path: absent, or holding a tag.
type regState struct {
	exists bool
	value  string
}

// kvModel is the namespace as independent registers, partitioned by path.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(histInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return regState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st, in, out := state.(regState), input.(histInput), output.(histOutput)
		switch in.Op {
		case "put":
			if !out.Unknown && (out.Status == 201) == st.exists {
				return false, st // 201 on an existing path, or 200 on an absent one
			}
			return true, regState{exists: true, value: in.Value}
		case "delete":
			if !out.Unknown && (out.Status == 204) != st.exists {
				return false, st
			}
			return true, regState{}
		default: // get
			if out.Status == 404 {
				return !st.exists, st
			}
			return st.exists && st.value == out.Value, st
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(histInput), output.(histOutput)
		res := fmt.Sprint(out.Status)
		if out.Unknown {
			res = "?"
		}
		switch in.Op {
		case "put":
			return fmt.Sprintf("put(%s, %s) → %s", in.Key, in.Value, res)
		case "delete":
			return fmt.Sprintf("delete(%s) → %s", in.Key, res)
		}
		if out.Status == 404 {
			return fmt.Sprintf("get(%s) → 404", in.Key)
		}
		return fmt.Sprintf("get(%s) → %s", in.Key, out.Value)
	},
	DescribeState: func(state interface{}) string {
		st := state.(regState)
		if !st.exists {
			return "absent"
		}
		return st.value
	},
}

// histBody is the content stored for a tag: the tag, a newline, and a
// filler of 0-48 KiB derived from the tag, so that a torn or mixed-up body
// is detected.
func histBody(tag string) []byte {
	sum := sha256.Sum256([]byte(tag))
	n := (int(sum[0])<<8 | int(sum[1])) % (48 << 10)
	filler := bytes.Repeat([]byte(hex.EncodeToString(sum[:])), n/64+1)[:n]
	return append([]byte(tag+"\n"), filler...)
}

// parseHistBody returns the tag of a body made by histBody.
func parseHistBody(b []byte) (string, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return "", fmt.Errorf("no tag in a %d-byte body", len(b))
	}
	tag := string(b[:i])
	if !bytes.Equal(b, histBody(tag)) {
		return "", fmt.Errorf("body of %q is not what was written (%d bytes)", tag, len(b))
	}
	return tag, nil
}

// plainRead is a non-linearizable read of a history key, for the weak check.
type plainRead struct {
	key, value string // value "" = 404
	ret        int64
	node       string
}

// histRecorder collects the history. Its methods are safe for concurrent use.
type histRecorder struct {
	base   time.Time
	bucket string
	client *http.Client

	mu          sync.Mutex
	ops         []porcupine.Operation
	unknown     []int // indexes in ops of puts/deletes with unknown outcome
	nextClient  int
	putCalls    map[string]putCall // tag → the put that wrote it
	plain       []plainRead
	faults      []porcupine.Annotation
	oddities    []string       // unexpected statuses, corrupt bodies
	droppedGets int            // consistent gets that failed (not in the history)
	unknownWhy  map[string]int // "op status" or "op timeout|error" → count
	unknownEx   []string       // the first error of each kind
	truncated   []string       // 2xx answers whose body was cut (see truncation)
}

type putCall struct {
	key  string
	call int64
}

func newHistRecorder(bucket string, timeout time.Duration) *histRecorder {
	return &histRecorder{base: time.Now(), bucket: bucket, putCalls: map[string]putCall{}, unknownWhy: map[string]int{},
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
}

// now is the time since the recorder started, on the monotonic clock.
func (r *histRecorder) now() int64 { return int64(time.Since(r.base)) }

func (r *histRecorder) at(t time.Time) int64 { return int64(t.Sub(r.base)) }

// newClient returns a fresh porcupine client ID. A worker takes a new one
// after an operation with an unknown outcome (that operation stays open to
// the end of the history, like a crashed client's).
func (r *histRecorder) newClient() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextClient++
	return r.nextClient - 1
}

// fault records a fault (or healing) for the visualization.
func (r *histRecorder) fault(desc string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, porcupine.Annotation{Tag: "faults", Start: r.at(start), End: r.at(end),
		Description: desc, BackgroundColor: "#f4c7c3"})
}

func (r *histRecorder) oddity(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.oddities = append(r.oddities, fmt.Sprintf(format, args...))
}

// do runs one operation through baseURL (http://HOST:PORT) as client and
// records it. It reports the output (Unknown also for a failed get).
func (r *histRecorder) do(ctx context.Context, client int, baseURL string, in histInput) histOutput {
	u := baseURL + "/" + r.bucket + "/" + in.Key
	var req *http.Request
	switch in.Op {
	case "put":
		req, _ = http.NewRequestWithContext(ctx, "PUT", u, bytes.NewReader(histBody(in.Value)))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		r.mu.Lock()
		r.putCalls[in.Value] = putCall{key: in.Key, call: r.now()}
		r.mu.Unlock()
	case "delete":
		req, _ = http.NewRequestWithContext(ctx, "DELETE", u, nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
	case "get":
		req, _ = http.NewRequestWithContext(ctx, "GET", u+"?consistent=1", nil)
	}
	call := r.now()
	resp, err := r.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			err = fmt.Errorf("status %d, body cut after %d of %d bytes (%s %s via %s, called at %.3fs, %v later): %w",
				resp.StatusCode, len(body), resp.ContentLength, in.Op, in.Key, baseURL, time.Duration(call).Seconds(),
				time.Duration(r.now()-call).Round(time.Millisecond), err)
			r.truncation(resp.StatusCode, err)
		}
	}
	ret := r.now()
	out := histOutput{Unknown: true}
	why := ""
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled):
			why = "canceled" // the end of the load
		case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
			why = "timeout"
		default:
			why = "error"
		}
	}
	if err == nil {
		why = fmt.Sprint(resp.StatusCode)
		out.Status = resp.StatusCode
		switch {
		case in.Op == "put" && (out.Status == 200 || out.Status == 201),
			in.Op == "delete" && (out.Status == 204 || out.Status == 404),
			in.Op == "get" && out.Status == 404:
			out.Unknown = false
		case in.Op == "get" && out.Status == 200:
			tag, perr := parseHistBody(body)
			if perr != nil {
				r.oddity("consistent GET %s via %s: %v", in.Key, baseURL, perr)
				tag = "corrupt:" + perr.Error() // fails the model
			}
			out.Value, out.Unknown = tag, false
		case out.Status < 500:
			r.oddity("%s %s via %s: unexpected status %d: %.200s", in.Op, in.Key, baseURL, out.Status, body)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Unknown {
		k := in.Op + " " + why
		if r.unknownWhy[k] == 0 && err != nil {
			r.unknownEx = append(r.unknownEx, k+": "+err.Error())
		}
		r.unknownWhy[k]++
	}
	if out.Unknown && in.Op == "get" {
		r.droppedGets++
		return out
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	if out.Unknown {
		r.unknown = append(r.unknown, len(r.ops)-1)
	}
	return out
}

// plainGet reads key without ?consistent through baseURL and keeps the
// answer for checkPlainReads.
func (r *histRecorder) plainGet(ctx context.Context, baseURL, key string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", baseURL+"/"+r.bucket+"/"+key, nil)
	resp, err := r.client.Do(req)
	if err != nil {
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	ret := r.now()
	if err != nil {
		r.truncation(resp.StatusCode, fmt.Errorf("plain GET %s via %s at %.3fs: status %d, body cut after %d of %d bytes: %w",
			key, baseURL, time.Duration(ret).Seconds(), resp.StatusCode, len(body), resp.ContentLength, err))
		return
	}
	var value string
	switch resp.StatusCode {
	case 200:
		tag, perr := parseHistBody(body)
		if perr != nil {
			r.oddity("plain GET %s via %s: %v", key, baseURL, perr)
			return
		}
		value = tag
	case 404:
	default:
		if resp.StatusCode < 500 {
			r.oddity("plain GET %s via %s: unexpected status %d", key, baseURL, resp.StatusCode)
		}
		return
	}
	r.mu.Lock()
	r.plain = append(r.plain, plainRead{key: key, value: value, ret: ret, node: baseURL})
	r.mu.Unlock()
}

// truncation records a response whose status said success but whose body
// was cut (the server committed to 200 and then failed, e.g. a blob it
// could not fetch): a client gets a transport error after a success
// status. Not part of the model (the read failed), but a failure of the
// test: an unavailable file must be answered with an error status.
func (r *histRecorder) truncation(status int, err error) {
	if status < 200 || status > 299 || errors.Is(err, context.Canceled) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truncated = append(r.truncated, err.Error())
}

// checkTruncations fails the test if any success answer had a cut body.
func (r *histRecorder) checkTruncations(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.truncated) > 0 {
		t.Errorf("%d answers said 200 and then cut the body (a read that cannot be served must get an error status); first: %s",
			len(r.truncated), r.truncated[0])
	}
}

// stats counts the recorded operations by kind and outcome.
func (r *histRecorder) stats() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, op := range r.ops {
		in, out := op.Input.(histInput), op.Output.(histOutput)
		k := in.Op
		if out.Unknown {
			k += "?"
		}
		n[k]++
	}
	var why []string
	for k, v := range r.unknownWhy {
		why = append(why, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(why)
	why = append(why, r.unknownEx...)
	return fmt.Sprintf("%d operations: put %d (+%d unknown), delete %d (+%d unknown), consistent get %d (%d more failed, dropped); %d plain reads; unknown outcomes: %s",
		len(r.ops), n["put"], n["put?"], n["delete"], n["delete?"], n["get"], r.droppedGets, len(r.plain), strings.Join(why, ", "))
}

// checkPlainReads is the weak check of plain reads (see the file comment).
func (r *histRecorder) checkPlainReads(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for _, p := range r.plain {
		if p.value == "" {
			continue
		}
		pc, ok := r.putCalls[p.value]
		if !ok || pc.key != p.key || pc.call > p.ret {
			bad++
			if bad <= 10 {
				t.Errorf("plain GET %s via %s returned %q, never written to that path before the read", p.key, p.node, p.value)
			}
		}
	}
}

// check runs porcupine over the history; on a violation it writes the
// visualization to a file that outlives the test and names it.
func (r *histRecorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	ops := append([]porcupine.Operation(nil), r.ops...)
	faults := append([]porcupine.Annotation(nil), r.faults...)
	oddities := append([]string(nil), r.oddities...)
	r.mu.Unlock()
	for _, o := range oddities {
		t.Errorf("history: %s", o)
	}
	// Unknown outcomes stay open to the end of the history.
	end := r.now() + int64(time.Second)
	for i := range ops {
		if ops[i].Output.(histOutput).Unknown {
			ops[i].Return = end
		}
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, ops, 60*time.Second)
	t.Logf("linearizability check: %s in %v: %v", r.stats(), time.Since(start).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return
	}
	info.AddAnnotations(faults)
	f, err := os.CreateTemp("", "cairn-porcupine-"+strings.ReplaceAll(t.Name(), "/", "_")+"-*.html")
	if err == nil {
		err = porcupine.Visualize(kvModel, info, f)
		f.Close()
	}
	where := "could not write the visualization: " + fmt.Sprint(err)
	if err == nil {
		where = "visualization: " + f.Name()
	}
	if res == porcupine.Illegal {
		t.Errorf("the history is NOT linearizable; %s", where)
	} else {
		t.Errorf("the linearizability check timed out (result %v); %s", res, where)
	}
}

// TestHistoryModel checks the model itself on small hand-made histories
// (no cluster): a linearizable one with an unknown put that may land late,
// and one with a stale read.
func TestHistoryModel(t *testing.T) {
	op := func(client int, in histInput, call int64, out histOutput, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	const inf = 1 << 40
	ok := []porcupine.Operation{
		op(0, histInput{"put", "a", "v1"}, 0, histOutput{Status: 201}, 10),
		op(1, histInput{"put", "a", "v2"}, 5, histOutput{Unknown: true}, inf),
		op(0, histInput{"get", "a", ""}, 20, histOutput{Status: 200, Value: "v1"}, 30),
		op(0, histInput{"get", "a", ""}, 40, histOutput{Status: 200, Value: "v2"}, 50),
		op(0, histInput{"delete", "a", ""}, 60, histOutput{Status: 204}, 70),
		op(0, histInput{"delete", "a", ""}, 80, histOutput{Status: 404}, 90),
		op(2, histInput{"get", "b", ""}, 0, histOutput{Status: 404}, 5),
		op(2, histInput{"put", "b", "x"}, 6, histOutput{Status: 201}, 7),
	}
	if res := porcupine.CheckOperationsTimeout(kvModel, ok, 10*time.Second); res != porcupine.Ok {
		t.Fatalf("linearizable history judged %v", res)
	}
	for name, bad := range map[string][]porcupine.Operation{
		"stale read": {
			op(0, histInput{"put", "a", "v1"}, 0, histOutput{Status: 201}, 10),
			op(0, histInput{"put", "a", "v2"}, 20, histOutput{Status: 200}, 30),
			op(1, histInput{"get", "a", ""}, 40, histOutput{Status: 200, Value: "v1"}, 50),
		},
		"201 on an existing path": {
			op(0, histInput{"put", "a", "v1"}, 0, histOutput{Status: 201}, 10),
			op(1, histInput{"put", "a", "v2"}, 20, histOutput{Status: 201}, 30),
		},
		"read of a deleted path": {
			op(0, histInput{"put", "a", "v1"}, 0, histOutput{Status: 201}, 10),
			op(0, histInput{"delete", "a", ""}, 20, histOutput{Status: 204}, 30),
			op(1, histInput{"get", "a", ""}, 40, histOutput{Status: 200, Value: "v1"}, 50),
		},
	} {
		if res := porcupine.CheckOperationsTimeout(kvModel, bad, 10*time.Second); res != porcupine.Illegal {
			t.Errorf("%s: judged %v, want Illegal", name, res)
		}
	}
	for _, tag := range []string{"w1-2", "x", ""} {
		if got, err := parseHistBody(histBody(tag)); err != nil || got != tag {
			t.Errorf("body of %q: %q %v", tag, got, err)
		}
	}
	b := histBody("w1-2")
	if len(b) > 10 {
		b[len(b)-1] ^= 1
		if _, err := parseHistBody(b); err == nil {
			t.Error("a damaged body passed")
		}
	}
}
