package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := func() DetectorConfig {
		c := DefaultDetectorConfig()
		c.NodeID = 1
		c.Secret = testSecret
		return c
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("defaults with ID and secret: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*DetectorConfig)
		want string
	}{
		{"no id", func(c *DetectorConfig) { c.NodeID = 0 }, "NodeID"},
		{"no secret", func(c *DetectorConfig) { c.Secret = nil }, "Secret"},
		{"short secret", func(c *DetectorConfig) { c.Secret = []byte("15 bytes secret") }, "Secret"},
		{"meta too long", func(c *DetectorConfig) { c.Meta = make([]byte, MaxMetaSize+1) }, "Meta"},
		{"bad port", func(c *DetectorConfig) { c.BindPort = 70000 }, "ports"},
		{"timeout above interval", func(c *DetectorConfig) { c.ProbeTimeout = c.ProbeInterval }, "ProbeTimeout"},
		{"backoff upside down", func(c *DetectorConfig) { c.JoinRetryMax = c.JoinRetryMin / 2 }, "JoinRetryMin"},
		{"no event buffer", func(c *DetectorConfig) { c.EventBuffer = -1 }, "EventBuffer"},
	} {
		c := good()
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want ErrBadConfig mentioning %q", tc.name, err, tc.want)
		}
	}
	// NewDetector fills zero timing fields and rejects what is still bad.
	if _, err := NewDetector(DetectorConfig{NodeID: 1}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NewDetector without a secret: %v", err)
	}
	c := DetectorConfig{NodeID: 1, Secret: testSecret}.withDefaults()
	if c.ProbeInterval != 200*time.Millisecond || c.BindPort != 0 || c.BindAddr != "0.0.0.0" {
		t.Errorf("withDefaults: %+v", c)
	}
}

func TestGossipKey(t *testing.T) {
	k := gossipKey(testSecret)
	if len(k) != 32 {
		t.Fatalf("key length %d, want 32 (AES-256)", len(k))
	}
	if bytes.Equal(k, gossipKey([]byte("cairn test cluster secret, 32+ bytez"))) {
		t.Error("different secrets give the same key")
	}
	raw := []byte("0123456789abcdef0123456789abcdef") // a 32-byte secret is not used raw
	if bytes.Equal(gossipKey(raw), raw) {
		t.Error("a 32-byte secret became the key as is")
	}
}

func TestMetaEncoding(t *testing.T) {
	for _, tc := range []struct {
		leaving bool
		meta    string
	}{{false, ""}, {true, ""}, {false, "http://10.0.0.1:8080"}, {true, "http://10.0.0.1:8080"}} {
		l, m := decodeMeta(encodeMeta(tc.leaving, []byte(tc.meta)))
		if l != tc.leaving || string(m) != tc.meta {
			t.Errorf("round trip of (%v, %q) gave (%v, %q)", tc.leaving, tc.meta, l, m)
		}
	}
	if l, m := decodeMeta(nil); l || m != nil {
		t.Errorf("empty meta decodes as (%v, %q)", l, m)
	}
	if n := len(encodeMeta(true, make([]byte, MaxMetaSize))); n != 512 {
		t.Errorf("largest meta encodes to %d bytes, memberlist's limit is 512", n)
	}
}

func TestNodeNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   uint64
		ok   bool
	}{
		{"1", 1, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"0", 0, false},
		{"01", 0, false}, // not the canonical form of any ID
		{"+1", 0, false},
		{"web-1", 0, false},
		{"", 0, false},
	} {
		id, ok := parseNodeName(tc.name)
		if ok != tc.ok || (ok && id != tc.id) {
			t.Errorf("parseNodeName(%q) = %d, %v; want %d, %v", tc.name, id, ok, tc.id, tc.ok)
		}
		if tc.ok && nodeName(tc.id) != tc.name {
			t.Errorf("nodeName(%d) = %q", tc.id, nodeName(tc.id))
		}
	}
}

func TestLogWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &logWriter{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	w.Write([]byte("[ERR] memberlist: Failed to send gossip to 1.2.3.4:7946: refused\n"))
	got := buf.String()
	for _, want := range []string{"level=DEBUG", `msg="Failed to send gossip to 1.2.3.4:7946: refused"`, "memberlist_level=ERR"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
	buf.Reset()
	quiet := &logWriter{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if n, err := quiet.Write([]byte("[WARN] memberlist: x\n")); n != 21 || err != nil || buf.Len() != 0 {
		t.Errorf("at Info level: wrote %d, %v, logged %q", n, err, buf.String())
	}
}

func TestStaticLiveness(t *testing.T) {
	var zero StaticLiveness
	if zero.Alive(1) {
		t.Error("the zero StaticLiveness has a live node")
	}
	l := NewStaticLiveness(1, 3)
	if !l.Alive(1) || l.Alive(2) || !l.Alive(3) {
		t.Error("NewStaticLiveness(1, 3) is wrong")
	}
	l.Set(3, false)
	l.Set(2, true)
	if l.Alive(3) || !l.Alive(2) {
		t.Error("Set did not take")
	}
	var _ Liveness = l
}
