package fuse

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Spec
		err  string
	}{
		{spec: "web:/srv/www", want: Spec{Bucket: "web", Dir: "/srv/www", Mode: ModeNoFlush}},
		{spec: "web/sessions:/var/lib/php/sessions:handles", want: Spec{Bucket: "web", Prefix: "sessions", Dir: "/var/lib/php/sessions", Mode: ModeHandles}},
		{spec: "web:/srv/www:noflush,nolocks", want: Spec{Bucket: "web", Dir: "/srv/www", Mode: ModeNoFlush, NoLocks: true}},
		{spec: "web/db:/srv/db:flush", want: Spec{Bucket: "web", Prefix: "db", Dir: "/srv/db", Mode: ModeFlush}},
		{spec: "web:/srv/www:noflush,handles", err: "exclude each other"},
		{spec: "web:/srv/www:flush,handles", err: "exclude each other"},
		{spec: "web:/srv/www:fast", err: `unknown option "fast"`},
		{spec: "web", err: "want BUCKET"},
	} {
		got, err := ParseSpec(c.spec)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error containing %q", c.spec, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v, %v; want %+v", c.spec, got, err, c.want)
		}
	}
}
