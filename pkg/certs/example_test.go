package certs_test

import (
	"fmt"
	"net"
	"time"

	"github.com/hostplane/hostplane/pkg/certs"
)

func Example() {
	ca, err := certs.NewCA("cluster-ca", 10*365*24*time.Hour)
	if err != nil {
		panic(err)
	}
	serving, err := ca.Issue(certs.Request{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"kubernetes.default.svc"},
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage:      certs.UsageServer,
		Lifetime:   365 * 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}
	keyPEM, err := serving.KeyPEM()
	if err != nil {
		panic(err)
	}
	parsed, err := certs.ParseKeyPair(serving.CertPEM(), keyPEM)
	if err != nil {
		panic(err)
	}
	fmt.Println(parsed.Cert.Subject.CommonName, parsed.Cert.VerifyHostname("127.0.0.1") == nil)
	// Output: kube-apiserver true
}
