package sigv4

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestErrorKinds(t *testing.T) {
	e := ErrMalformedChunk.with("chunk %d is bad", 3)
	wrapped := fmt.Errorf("put object: %w", e)
	for _, tc := range []struct {
		target error
		want   bool
	}{
		{ErrMalformedChunk, true},
		{ErrInvalidRequest, false}, // same S3 code, another kind
		{ErrIncompleteBody, false},
		{errors.New("other"), false},
	} {
		if got := errors.Is(wrapped, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v", wrapped, tc.target, got)
		}
	}
	var got *Error
	if !errors.As(wrapped, &got) || got.Code != "InvalidRequest" || got.Status != http.StatusBadRequest || got.Message != "chunk 3 is bad" {
		t.Fatalf("errors.As: %+v", got)
	}
	if e.Error() != "sigv4: InvalidRequest: chunk 3 is bad" {
		t.Fatalf("Error() = %q", e.Error())
	}
	// An error derived from a derived error keeps the original kind.
	if e2 := e.with("again"); !errors.Is(e2, ErrMalformedChunk) {
		t.Fatal("derived twice loses its kind")
	}
	for _, s := range []*Error{ErrAccessDenied, ErrSignatureDoesNotMatch, ErrInvalidAccessKeyID, ErrRequestTimeTooSkewed} {
		if s.Status != http.StatusForbidden {
			t.Errorf("%s: status %d", s.Code, s.Status)
		}
	}
}
