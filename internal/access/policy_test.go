package access

import (
	"errors"
	"testing"
)

func TestPolicy(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLike":{"s3:prefix":"public/*"}}},
		{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/pub/*"]},
		{"Effect":"Deny","Principal":{"AWS":["arn:aws:iam::CKBAD:user/x"]},"Action":"s3:*","Resource":"arn:aws:s3:::*"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    PolicyRequest
		want Effect
	}{
		{PolicyRequest{"CK1", "s3:ListBucket", "arn:aws:s3:::b", "public/x"}, Allowed},
		{PolicyRequest{"CK1", "s3:ListBucket", "arn:aws:s3:::b", "private/x"}, NoEffect},
		{PolicyRequest{"", "s3:GetObject", "arn:aws:s3:::b/pub/a/b.jpg", ""}, Allowed},
		{PolicyRequest{"", "s3:GetObject", "arn:aws:s3:::b/priv/a", ""}, NoEffect},
		{PolicyRequest{"CKBAD", "s3:GetObject", "arn:aws:s3:::b/pub/a", ""}, Denied},
		{PolicyRequest{"CK1", "s3:PutObject", "arn:aws:s3:::b/x", ""}, NoEffect},
	} {
		if got := p.Decide(tc.r); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.r, got, tc.want)
		}
	}
	for _, bad := range []string{`{`,
		`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*","Condition":{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}`, `{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:*","Resource":"*"}]}`, `{"Statement":[{"Effect":"Allow","Principal":"*"}]}`} {
		if _, err := ParsePolicy([]byte(bad)); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("ParsePolicy(%s) = %v", bad, err)
		}
	}
}
