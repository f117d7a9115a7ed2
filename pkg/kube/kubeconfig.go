package kube

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigSpec describes a kubeconfig with one cluster, one user and one context. The user
// authenticates with either a client certificate (ClientCertPEM and ClientKeyPEM) or a
// bearer Token, never both.
type KubeconfigSpec struct {
	Server string // https://host:port
	CAPEM  []byte // the CA that signed the server's serving certificate

	ClientCertPEM, ClientKeyPEM []byte
	Token                       string

	ClusterName string // default "hostplane"
	UserName    string // default "admin"
	ContextName string // default "<UserName>@<ClusterName>"
	Namespace   string // the context's namespace; default none (the server's "default")
}

func (s *KubeconfigSpec) defaults() {
	if s.ClusterName == "" {
		s.ClusterName = "hostplane"
	}
	if s.UserName == "" {
		s.UserName = "admin"
	}
	if s.ContextName == "" {
		s.ContextName = s.UserName + "@" + s.ClusterName
	}
}

// Validate reports what is missing or contradictory in s.
func (s KubeconfigSpec) Validate() error {
	var problems []string
	if u, err := url.Parse(s.Server); s.Server == "" || err != nil || u.Scheme != "https" || u.Host == "" {
		problems = append(problems, fmt.Sprintf("server %q is not an https URL", s.Server))
	}
	if len(s.CAPEM) == 0 {
		problems = append(problems, "no CA")
	}
	hasCert := len(s.ClientCertPEM) > 0 || len(s.ClientKeyPEM) > 0
	switch {
	case hasCert && s.Token != "":
		problems = append(problems, "both a client certificate and a token")
	case hasCert && (len(s.ClientCertPEM) == 0 || len(s.ClientKeyPEM) == 0):
		problems = append(problems, "a client certificate needs both the certificate and the key")
	case !hasCert && s.Token == "":
		problems = append(problems, "no credentials (a client certificate or a token)")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidKubeconfig, strings.Join(problems, "; "))
	}
	return nil
}

// Kubeconfig returns the kubeconfig spec describes, serialised as YAML.
func Kubeconfig(spec KubeconfigSpec) ([]byte, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec.defaults()
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = spec.Server
	cluster.CertificateAuthorityData = spec.CAPEM
	cfg.Clusters[spec.ClusterName] = cluster

	user := clientcmdapi.NewAuthInfo()
	user.ClientCertificateData = spec.ClientCertPEM
	user.ClientKeyData = spec.ClientKeyPEM
	user.Token = spec.Token
	cfg.AuthInfos[spec.UserName] = user

	kctx := clientcmdapi.NewContext()
	kctx.Cluster = spec.ClusterName
	kctx.AuthInfo = spec.UserName
	kctx.Namespace = spec.Namespace
	cfg.Contexts[spec.ContextName] = kctx
	cfg.CurrentContext = spec.ContextName

	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("serialise kubeconfig: %w", err)
	}
	return out, nil
}

// RESTConfig returns the client configuration of kubeconfig's current context. Its requests
// are traced (see Traced).
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return Traced(cfg), nil
}

// Clientset returns a typed client for kubeconfig's current context.
func Clientset(kubeconfig []byte) (*kubernetes.Clientset, error) {
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new clientset: %w", err)
	}
	return cs, nil
}
