package sandbox

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

// The sandbox's certificates verify as the apiserver and its clients use
// them: the serving certificate for its names and addresses, the front
// proxy's client certificate for client auth.
func TestPKIIssuesVerifiableCertificates(t *testing.T) {
	p := pki{dir: t.TempDir()}
	if err := p.ensure(); err != nil {
		t.Fatal(err)
	}
	load := func(name string) *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(p.path(name+".crt"), p.path(name+".key"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	pool := func(name string) *x509.CertPool {
		pem, err := os.ReadFile(p.path(name + ".crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		return pool
	}
	for _, host := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := load("apiserver").Verify(x509.VerifyOptions{Roots: pool("ca"), DNSName: host,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if _, err := load("front-proxy-client").Verify(x509.VerifyOptions{Roots: pool("front-proxy-ca"),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("front proxy client certificate: %v", err)
	}
	if ca := load("ca"); !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Error("the CA cannot sign")
	}
}
