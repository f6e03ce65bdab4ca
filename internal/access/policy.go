package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Policy is an S3 bucket policy: statements that allow or deny actions
// ("s3:GetObject", "s3:ListBucket", wildcards) on resources
// ("arn:aws:s3:::bucket", "arn:aws:s3:::bucket/prefix*") to principals
// ("*", or access key ids). Cairn evaluates the subset web sites use:
// Effect, Principal ("*" or {"AWS": ids or "*"}), Action, Resource, and
// the conditions StringEquals and StringLike on s3:prefix. A policy with
// another condition is refused (ErrBadPolicy): evaluating part of it could
// widen access or drop a Deny. An explicit Deny wins over any Allow.
type Policy struct {
	stmts []statement
}

type statement struct {
	allow      bool
	principals []string // "*" or ids
	actions    []string
	resources  []string
	prefixIs   []string // StringEquals s3:prefix
	prefixLike []string // StringLike s3:prefix
	unknown    bool     // a condition Cairn does not evaluate
}

// ErrBadPolicy is returned (wrapped) by ParsePolicy.
var ErrBadPolicy = errors.New("access: bad policy")

// oneOrMany decodes a JSON string or array of strings.
type oneOrMany []string

func (o *oneOrMany) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*o = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*o = many
	return nil
}

// ParsePolicy parses a bucket policy document.
func ParsePolicy(doc []byte) (*Policy, error) {
	var raw struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPolicy, err)
	}
	var stmts []json.RawMessage
	if err := json.Unmarshal(raw.Statement, &stmts); err != nil {
		var one json.RawMessage
		if err := json.Unmarshal(raw.Statement, &one); err != nil || len(one) == 0 {
			return nil, fmt.Errorf("%w: no Statement", ErrBadPolicy)
		}
		stmts = []json.RawMessage{one}
	}
	p := &Policy{}
	for i, rs := range stmts {
		var st struct {
			Effect    string
			Principal json.RawMessage
			Action    oneOrMany
			Resource  oneOrMany
			Condition map[string]map[string]oneOrMany
		}
		if err := json.Unmarshal(rs, &st); err != nil {
			return nil, fmt.Errorf("%w: statement %d: %v", ErrBadPolicy, i, err)
		}
		s := statement{actions: st.Action, resources: st.Resource}
		switch st.Effect {
		case "Allow":
			s.allow = true
		case "Deny":
		default:
			return nil, fmt.Errorf("%w: statement %d: Effect %q (want Allow or Deny)", ErrBadPolicy, i, st.Effect)
		}
		if len(s.actions) == 0 || len(s.resources) == 0 {
			return nil, fmt.Errorf("%w: statement %d needs an Action and a Resource", ErrBadPolicy, i)
		}
		var star string
		if err := json.Unmarshal(st.Principal, &star); err == nil {
			s.principals = []string{star}
		} else {
			var m map[string]oneOrMany
			if err := json.Unmarshal(st.Principal, &m); err != nil {
				return nil, fmt.Errorf("%w: statement %d: bad Principal", ErrBadPolicy, i)
			}
			s.principals = m["AWS"]
		}
		for op, kv := range st.Condition {
			for k, v := range kv {
				switch {
				case k == "s3:prefix" && op == "StringEquals":
					s.prefixIs = append(s.prefixIs, v...)
				case k == "s3:prefix" && op == "StringLike":
					s.prefixLike = append(s.prefixLike, v...)
				default:
					// Not evaluated: refuse the policy rather than let a
					// Deny silently never match (or an Allow never apply).
					return nil, fmt.Errorf("%w: statement %d: condition %s on %s is not supported (only StringEquals and StringLike on s3:prefix)", ErrBadPolicy, i, op, k)
				}
			}
		}
		p.stmts = append(p.stmts, s)
	}
	return p, nil
}

// Effect is the outcome of a policy for a request.
type Effect uint8

// Effects.
const (
	NoEffect Effect = iota // no statement matches
	Allowed
	Denied
)

// PolicyRequest is what a policy is evaluated on.
type PolicyRequest struct {
	Principal string // access key id; "" anonymous
	Action    string // "s3:GetObject", ...
	Resource  string // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
	Prefix    string // s3:prefix of a listing
}

// Decide evaluates the policy: Denied if a Deny statement matches,
// else Allowed if an Allow does, else NoEffect.
func (p *Policy) Decide(r PolicyRequest) Effect {
	out := NoEffect
	for i := range p.stmts {
		s := &p.stmts[i]
		if !s.matches(r) {
			continue
		}
		if !s.allow {
			return Denied
		}
		out = Allowed
	}
	return out
}

func (s *statement) matches(r PolicyRequest) bool {
	if s.unknown {
		return false
	}
	ok := false
	for _, pr := range s.principals {
		if pr == "*" || (r.Principal != "" && (pr == r.Principal || strings.Contains(pr, "::"+r.Principal+":") || strings.HasSuffix(pr, "/"+r.Principal))) {
			ok = true
			break
		}
	}
	if !ok || !anyGlob(s.actions, r.Action, true) || !anyGlob(s.resources, r.Resource, false) {
		return false
	}
	if len(s.prefixIs) > 0 || len(s.prefixLike) > 0 {
		for _, v := range s.prefixIs {
			if v == r.Prefix {
				return true
			}
		}
		return anyGlob(s.prefixLike, r.Prefix, false)
	}
	return true
}

// anyGlob reports whether v matches one of the patterns ('*' any run of
// characters, '?' one character; actions compare case-insensitively).
func anyGlob(patterns []string, v string, fold bool) bool {
	if fold {
		v = strings.ToLower(v)
	}
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if p == "*" || p == v {
			return true
		}
		if strings.ContainsAny(p, "*?") && globMatch(p, v) {
			return true
		}
	}
	return false
}

// globMatch matches '*' across '/' too (path.Match stops at it).
func globMatch(p, v string) bool {
	// Replace '/' by a byte path.Match treats as ordinary on both sides.
	const sep = "\x00"
	ok, err := path.Match(escapeGlob(strings.ReplaceAll(p, "/", sep)), strings.ReplaceAll(v, "/", sep))
	return err == nil && ok
}

// escapeGlob escapes the characters path.Match treats specially besides
// '*' and '?'.
func escapeGlob(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`)
	return r.Replace(p)
}
