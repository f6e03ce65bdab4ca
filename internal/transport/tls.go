package transport

// Node-to-node TLS (docs/design/0003-cluster-tls.md).
//
// The cluster CA's key is derived from the cluster secret, so every node
// that holds the secret holds the CA: nothing is made by hand, stored or
// sent at join, and every node issues its own certificate at start, for
// a key made in memory that never leaves the process. A peer proves it
// holds the secret by presenting a certificate signed by the CA (and, as
// before, by the HMAC of each request); the URI SAN cairn://node/ID names
// the node, and both ends check it against the IDs of the request.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ClusterServerName is the TLS server name (SNI) node-to-node clients
// send. A listener that also serves the public certificate (--tls-cert)
// answers it with the node certificate instead.
const ClusterServerName = "cluster.cairn.invalid"

const (
	caKeyLabel   = "cairn cluster ca p-256 key v1"
	nodeCertLife = 90 * 24 * time.Hour
	// A certificate is renewed once less than a third of its life is left.
	renewBefore = nodeCertLife / 3
	// Certificates start an hour in the past: peers' clocks differ (the
	// request HMAC already bounds the skew to seconds).
	backdate = time.Hour
)

// ErrTLSRequired: the peer requires node-to-node TLS and the request came
// without it, or the peer does not speak TLS while this node does (426
// Upgrade Required on the wire). Every node of a cluster needs the same
// --cluster-tls setting.
var ErrTLSRequired = errors.New("transport: node-to-node TLS setting differs between the nodes (--cluster-tls)")

// Identity is a node's TLS identity in its cluster: the cluster CA
// (derived from the secret) and this node's certificate, issued by it and
// renewed in memory before it expires. Safe for concurrent use.
type Identity struct {
	id     NodeID
	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
	pool   *x509.CertPool
	now    func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

// NewIdentity derives the cluster CA from secret and issues node id's
// certificate. now is the clock (nil: time.Now).
func NewIdentity(secret []byte, id NodeID, now func() time.Time) (*Identity, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: cluster secret is %d bytes, want at least %d", ErrBadConfig, len(secret), MinSecretLen)
	}
	if id == 0 {
		return nil, fmt.Errorf("%w: NodeID is required", ErrBadConfig)
	}
	if now == nil {
		now = time.Now
	}
	caKey, err := deriveCAKey(secret)
	if err != nil {
		return nil, err
	}
	caCert, err := caCertificate(caKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	ident := &Identity{id: id, caKey: caKey, caCert: caCert, pool: pool, now: now}
	if _, err := ident.current(); err != nil {
		return nil, err
	}
	return ident, nil
}

// caKeyIterations is the PBKDF2-SHA256 work factor of the CA key
// derivation (OWASP's figure for PBKDF2-HMAC-SHA256): about 0.1 s of one
// core here, once per process. The CA's public key is in every handshake,
// so it is a way to test guesses of the secret offline; this makes each
// guess cost that much (design 0003, "The cost").
const caKeyIterations = 600_000

var caKeys sync.Map // SHA-256 of a secret → *ecdsa.PrivateKey (the derivation is slow on purpose)

// deriveCAKey turns the secret into a P-256 private key: PBKDF2-SHA256
// (caKeyIterations), then 48 bytes of HKDF-SHA256 reduced to a scalar in
// [1, N-1] (the extra bytes make the modular bias negligible).
func deriveCAKey(secret []byte) (*ecdsa.PrivateKey, error) {
	id := sha256.Sum256(secret)
	if k, ok := caKeys.Load(id); ok {
		return k.(*ecdsa.PrivateKey), nil
	}
	prk, err := pbkdf2.Key(sha256.New, string(secret), []byte(caKeyLabel), caKeyIterations, 32)
	if err != nil {
		return nil, fmt.Errorf("transport: derive the cluster CA key: %w", err)
	}
	okm, err := hkdf.Expand(sha256.New, prk, caKeyLabel, 48)
	if err != nil {
		return nil, fmt.Errorf("transport: derive the cluster CA key: %w", err)
	}
	n := elliptic.P256().Params().N
	d := new(big.Int).SetBytes(okm)
	d.Mod(d, new(big.Int).Sub(n, big.NewInt(1)))
	d.Add(d, big.NewInt(1))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d.FillBytes(make([]byte, 32)))
	if err != nil {
		return nil, fmt.Errorf("transport: derive the cluster CA key: %w", err)
	}
	caKeys.Store(id, k)
	return k, nil
}

// caCertificate self-signs the CA. Its fields are fixed, so every node
// makes an equivalent certificate (the ECDSA signature differs, the key
// and name do not): a chain verifies against any node's copy.
func caCertificate(k *ecdsa.PrivateKey) (*x509.Certificate, error) {
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("transport: cluster CA: %w", err)
	}
	sum := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(sum[:16]),
		Subject:               pkix.Name{Organization: []string{"Cairn"}, CommonName: "Cairn cluster CA " + hex.EncodeToString(sum[:8])},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          sum[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, fmt.Errorf("transport: cluster CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

// NodeURI is the URI SAN that names node id in its certificate.
func NodeURI(id NodeID) *url.URL {
	return &url.URL{Scheme: "cairn", Host: "node", Path: "/" + id.String()}
}

// issue makes a new key and a certificate for it, valid from now.
func (i *Identity) issue(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("transport: node key: %w", err)
	}
	var serial [16]byte
	_, _ = rand.Read(serial[:])
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).SetBytes(serial[:]),
		Subject:      pkix.Name{Organization: []string{"Cairn"}, CommonName: "cairn node " + i.id.String()},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(nodeCertLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{NodeURI(i.id)},
		DNSNames:     []string{ClusterServerName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.caCert, &key.PublicKey, i.caKey)
	if err != nil {
		return nil, fmt.Errorf("transport: node certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("transport: node certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, i.caCert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// current returns the node certificate, issuing a new one when less than
// a third of its life is left.
func (i *Identity) current() (*tls.Certificate, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.now()
	if i.cert != nil && i.cert.Leaf.NotAfter.Sub(now) > renewBefore {
		return i.cert, nil
	}
	c, err := i.issue(now)
	if err != nil {
		if i.cert != nil && now.Before(i.cert.Leaf.NotAfter) {
			return i.cert, nil // keep the one that still works
		}
		return nil, err
	}
	i.cert = c
	return c, nil
}

// Certificate returns the node's current certificate (leaf and CA).
func (i *Identity) Certificate() (*tls.Certificate, error) { return i.current() }

// CA returns the cluster CA certificate.
func (i *Identity) CA() *x509.Certificate { return i.caCert }

// ServerConfig is the TLS configuration of a listener of node-to-node
// RPC: the node certificate, TLS 1.3, HTTP/1.1, and a client certificate
// verified against the cluster CA when one is sent (Server refuses RPCs
// without one).
func (i *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return i.current()
		},
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  i.pool,
	}
}

// Listener serves node-to-node TLS on ln (ServerConfig).
func (i *Identity) Listener(ln net.Listener) net.Listener {
	return tls.NewListener(ln, i.ServerConfig())
}

// ClientConfig is the TLS configuration of a node-to-node client: the
// node certificate as client certificate, and a server certificate
// checked against the cluster CA (not the system roots, not by host
// name: peers are named by node ID; the caller checks PeerID of the
// answer against the node it addressed, as HTTPClient does).
func (i *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"},
		ServerName: ClusterServerName,
		RootCAs:    i.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return i.current()
		},
	}
}

// PeerID returns the node ID in the verified certificate of a TLS
// connection's peer. It fails when the connection is not TLS, or its peer
// sent no certificate verified against the cluster CA.
func PeerID(cs *tls.ConnectionState) (NodeID, error) {
	if cs == nil {
		return 0, errors.New("not a TLS connection")
	}
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return 0, errors.New("no certificate signed by the cluster CA")
	}
	return nodeOf(cs.VerifiedChains[0][0])
}

func nodeOf(c *x509.Certificate) (NodeID, error) {
	for _, u := range c.URIs {
		if u.Scheme != "cairn" || u.Host != "node" || len(u.Path) < 2 {
			continue
		}
		id, err := strconv.ParseUint(u.Path[1:], 10, 64)
		if err == nil && id != 0 {
			return NodeID(id), nil
		}
	}
	return 0, errors.New("certificate names no cairn node")
}
