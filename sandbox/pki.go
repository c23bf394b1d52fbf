package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki writes the sandbox's certificates once; later starts reuse them so that
// kubeconfigs handed to tests stay valid across restarts.
type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) ensure() error {
	if _, err := os.Stat(p.path("done")); err == nil {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	// Each certificate in turn; a leaf is signed by a CA made before it.
	certs, keys := map[string]*x509.Certificate{}, map[string]*ecdsa.PrivateKey{}
	leaf := func(ca, cn string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) func() (*x509.Certificate, *ecdsa.PrivateKey, error) {
		return func() (*x509.Certificate, *ecdsa.PrivateKey, error) {
			return signLeaf(certs[ca], keys[ca], cn, dns, ips, usage)
		}
	}
	for _, c := range []struct {
		name  string
		issue func() (*x509.Certificate, *ecdsa.PrivateKey, error)
	}{
		{"ca", func() (*x509.Certificate, *ecdsa.PrivateKey, error) { return newCA("sandbox-ca") }},
		{"apiserver", leaf("ca", "kube-apiserver",
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, x509.ExtKeyUsageServerAuth)},
		{"front-proxy-ca", func() (*x509.Certificate, *ecdsa.PrivateKey, error) { return newCA("front-proxy-ca") }},
		{"front-proxy-client", leaf("front-proxy-ca", "front-proxy-client", nil, nil, x509.ExtKeyUsageClientAuth)},
	} {
		cert, key, err := c.issue()
		if err == nil {
			err = writePair(p.path(c.name), cert, key)
		}
		if err != nil {
			return err
		}
		certs[c.name], keys[c.name] = cert, key
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	return os.WriteFile(p.path("done"), nil, 0o600)
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return issue(name, nil, nil, func(t *x509.Certificate) {
		t.KeyUsage |= x509.KeyUsageCertSign
		t.BasicConstraintsValid, t.IsCA = true, true
	})
}

func signLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return issue(cn, ca, caKey, func(t *x509.Certificate) {
		t.ExtKeyUsage, t.DNSNames, t.IPAddresses = []x509.ExtKeyUsage{usage}, dns, ips
	})
}

// issue makes a key and a certificate for it, valid ten years, signed by
// parent (self-signed when parent is nil); shape sets what is particular.
func issue(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, shape func(*x509.Certificate)) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	shape(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func writePair(base string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	if err := writePEM(base+".crt", "CERTIFICATE", cert.Raw); err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(base+".key", "EC PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
