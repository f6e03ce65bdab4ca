// Package access decides who may do what: it authenticates the credentials a
// request carries and authorizes an action on a resource.
//
// Today there is one credential, the node's admin key, presented as
// "Authorization: Bearer KEY", and one bucket policy, public-read or private:
//
//   - the admin key may do everything;
//   - an anonymous request may read (GET/HEAD, directory listings) a
//     public bucket and nothing else;
//   - a request that presents a wrong key is refused with ErrForbidden even
//     where anonymous access would be allowed, so that a misconfigured
//     client learns of its mistake.
//
// Keys are compared in constant time (SHA-256 of both sides, then
// crypto/subtle), so neither the content nor the length of the admin key
// leaks through timing.
//
// The package is shaped for what comes next, without changing callers:
// access keys (an id and a secret) stored in the namespace, with grants per
// bucket and path prefix for the Actions below; SigV4 and signed, expiring
// URLs as further credential kinds recognised by Authenticate; and per bucket
// or node rules (deny or throttle by User-Agent pattern or IP/CIDR, token
// bucket rate limits per client IP) checked by Authorize. Front ends call
// only Authenticate and Authorize and map the two sentinel errors to their
// protocol's statuses.
//
// The package does no I/O and holds no package-level mutable state.
package access
