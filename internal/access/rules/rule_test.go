package rules

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	big := make([]byte, MaxBodySize+1)
	tests := []struct {
		name string
		rule Rule
		want string // "" = valid; else a fragment of the error
	}{
		{"deny ua", Rule{UserAgent: "(?i)curl", Deny: 403}, ""},
		{"deny ip", Rule{IP: "10.0.0.0/8", Deny: 451}, ""},
		{"deny v6 cidr", Rule{IP: "2001:db8::/32", Deny: 403}, ""},
		{"deny bare ip", Rule{IP: "192.0.2.7", Deny: 403}, ""},
		{"deny mapped ip", Rule{IP: "::ffff:192.0.2.7", Deny: 403}, ""},
		{"deny path", Rule{Bucket: "b", PathPrefix: "private/", Deny: 404}, ""},
		{"respond defaults", Rule{UserAgent: "bot", Respond: &Response{Body: []byte("go away")}}, ""},
		{"respond 200", Rule{UserAgent: "bot", Respond: &Response{Status: 200, ContentType: "text/plain"}}, ""},
		{"respond max body", Rule{UserAgent: "bot", Respond: &Response{Body: big[:MaxBodySize]}}, ""},
		{"default throttle", Rule{Rate: 10}, ""},
		{"throttle ua burst", Rule{UserAgent: "x", Rate: 0.5, Burst: 3}, ""},

		{"bad regexp", Rule{UserAgent: "(", Deny: 403}, `rules: bad user-agent regexp "(": error parsing regexp: missing closing )`},
		{"bad cidr", Rule{IP: "10.0.0.0/33", Deny: 403}, `rules: bad ip "10.0.0.0/33": `},
		{"bad ip", Rule{IP: "10.0.0.256", Deny: 403}, `rules: bad ip "10.0.0.256"`},
		{"ip with zone", Rule{IP: "fe80::1%eth0", Deny: 403}, `zone`},
		{"no action", Rule{UserAgent: "x"}, "rules: a rule needs exactly one action: --deny, --respond or --rate"},
		{"two actions", Rule{UserAgent: "x", Deny: 403, Rate: 1}, "exactly one action"},
		{"three actions", Rule{UserAgent: "x", Deny: 403, Rate: 1, Respond: &Response{}}, "exactly one action"},
		{"deny no match", Rule{Deny: 403}, "rules: a deny or respond rule needs a match"},
		{"respond no match", Rule{Respond: &Response{}}, "a deny or respond rule needs a match"},
		{"two matches", Rule{UserAgent: "x", IP: "10.0.0.1", Deny: 403}, "at most one match"},
		{"deny 399", Rule{UserAgent: "x", Deny: 399}, "deny status 399 out of range 400-599"},
		{"deny 600", Rule{UserAgent: "x", Deny: 600}, "deny status 600 out of range"},
		{"deny negative", Rule{UserAgent: "x", Deny: -1}, "deny status -1 out of range"},
		{"respond 199", Rule{UserAgent: "x", Respond: &Response{Status: 199}}, "respond status 199 out of range 200-599"},
		{"respond big body", Rule{UserAgent: "x", Respond: &Response{Body: big}}, "respond body of 65537 bytes is larger than 65536"},
		{"respond bad type", Rule{UserAgent: "x", Respond: &Response{ContentType: "text/html\r\nX-Evil: 1"}}, "bad respond content type"},
		{"rate zero with burst", Rule{Burst: 3}, "exactly one action"},
		{"rate negative", Rule{Rate: -1}, "rate -1 out of range"},
		{"rate nan", Rule{Rate: math.NaN()}, "rate NaN out of range"},
		{"rate inf", Rule{Rate: math.Inf(1)}, "out of range"},
		{"burst negative", Rule{Rate: 1, Burst: -1}, "burst -1 out of range"},
		{"burst without rate", Rule{UserAgent: "x", Deny: 403, Burst: 2}, "burst 2 given without --rate"},
		{"bucket with slash", Rule{Bucket: "a/b", Rate: 1}, `bad bucket "a/b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rule.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error containing %q", tt.want)
			}
			if !errors.Is(err, ErrBadRule) {
				t.Errorf("Validate() = %v, does not wrap ErrBadRule", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"10/s", 10, false},
		{"600/m", 10, false},
		{"5", 5, false},
		{"0.5", 0.5, false},
		{" 36 / h ", 0.01, false},
		{"1/m", 1.0 / 60, false},
		{"", 0, true},
		{"0", 0, true},
		{"-3/s", 0, true},
		{"10/d", 0, true},
		{"10/", 0, true},
		{"/s", 0, true},
		{"abc", 0, true},
		{"NaN", 0, true},
		{"Inf/s", 0, true},
		{"1e10/s", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrBadRule) {
					t.Fatalf("ParseRate(%q) = %v, %v; want an ErrBadRule", tt.in, got, err)
				}
				return
			}
			if err != nil || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFormatRate(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{10, "10/s"},
		{1.0 / 60, "1/m"},
		{0.5, "30/m"},
		{0.01, "36/h"},
		{1.5, "90/m"},
		{1e-5, "1e-05/s"},
	}
	for _, tt := range tests {
		if got := FormatRate(tt.in); got != tt.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseRate(FormatRate(tt.in))
		if err != nil || math.Abs(back-tt.in) > 1e-12 {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v", tt.in, back, err)
		}
	}
}

func TestCompareIDs(t *testing.T) {
	want := []string{"a", "r", "r01", "r1", "r2", "r9", "r10", "r10a", "r11", "r100", "rx", "s1"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, compareIDs)
	if !slices.Equal(got, want) {
		t.Fatalf("sorted = %v, want %v", got, want)
	}
	// Transitivity over a mixed set: sorting any permutation gives one order.
	ids := []string{"a9", "a10", "a1b", "a", "9", "10", "a01", "a1", "b", "a-1", "a/1", "a:1"}
	first := slices.Clone(ids)
	slices.SortFunc(first, compareIDs)
	for i := range ids {
		for j := range ids {
			a, b := ids[i], ids[j]
			if c, d := compareIDs(a, b), compareIDs(b, a); c != -d || (c == 0) != (a == b) {
				t.Fatalf("compareIDs(%q, %q) = %d, reverse %d", a, b, c, d)
			}
		}
	}
	for i := 1; i < len(first); i++ {
		for j := i; j < len(first); j++ {
			if compareIDs(first[i-1], first[j]) >= 0 {
				t.Fatalf("order %v not transitive at %q, %q", first, first[i-1], first[j])
			}
		}
	}
}

func TestRuleString(t *testing.T) {
	tests := []struct {
		rule Rule
		want string
	}{
		{Rule{ID: "r7", Bucket: "photos", UserAgent: "(?i)curl", Deny: 403}, `r7 bucket=photos user-agent~"(?i)curl" deny 403`},
		{Rule{ID: "r9", Rate: 10}, `r9 cluster all-clients rate 10/s burst 10`},
		{Rule{ID: "r3", IP: "10.0.0.0/8", Rate: 0.5, Burst: 4}, `r3 cluster ip=10.0.0.0/8 rate 30/m burst 4`},
		{Rule{ID: "r4", PathPrefix: "/b/x/", Respond: &Response{Body: []byte("no")}}, `r4 cluster path^="/b/x/" respond 403 "text/html; charset=utf-8" 2B`},
		{Rule{}, `- cluster all-clients no-action`},
	}
	for _, tt := range tests {
		if got := tt.rule.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestRuleJSON pins the stored field names: rules live in the replicated
// log, so renaming a field would lose data on upgrade.
func TestRuleJSON(t *testing.T) {
	r := Rule{ID: "r1", Bucket: "b", UserAgent: "ua", IP: "10.0.0.1", PathPrefix: "p/", Deny: 403,
		Respond: &Response{Status: 200, ContentType: "text/plain", Body: []byte("hi")}, Rate: 1.5, Burst: 2}
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"r1","bucket":"b","user_agent":"ua","ip":"10.0.0.1","path_prefix":"p/","deny":403,` +
		`"respond":{"status":200,"content_type":"text/plain","body":"aGk="},"rate":1.5,"burst":2}`
	if string(got) != want {
		t.Fatalf("json = %s\nwant   %s", got, want)
	}
	var back Rule
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != r.String() || string(back.Respond.Body) != "hi" {
		t.Fatalf("round trip = %+v", back)
	}
	short, _ := json.Marshal(Rule{ID: "r2", Rate: 3})
	if string(short) != `{"id":"r2","rate":3}` {
		t.Fatalf("json = %s", short)
	}
}

// TestDecodeRecord: a stored rule gets its ID from the record's name and
// is validated; bad JSON or a bad rule is an error.
func TestDecodeRecord(t *testing.T) {
	r, err := DecodeRecord("7", []byte(`{"id":"ignored","user_agent":"(?i)badbot","deny":403}`))
	if err != nil || r.ID != "r7" || r.UserAgent != "(?i)badbot" || r.Deny != 403 {
		t.Fatalf("DecodeRecord: %+v, %v", r, err)
	}
	if _, err := DecodeRecord("8", []byte(`{"deny":403,"rate":1}`)); !errors.Is(err, ErrBadRule) {
		t.Errorf("two actions: %v, want ErrBadRule", err)
	}
	if _, err := DecodeRecord("9", []byte(`{`)); err == nil {
		t.Error("bad JSON accepted")
	}
}
