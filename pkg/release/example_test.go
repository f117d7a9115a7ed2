package release_test

import (
	"fmt"

	"github.com/hostplane/hostplane/pkg/release"
)

func Example() {
	r, err := release.Lookup("v1.34.4")
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Version, r.Minor(), r.Images[release.KubeAPIServer])
	fmt.Println(release.CheckUpgrade("1.33.13", "1.34.4"))
	fmt.Println(release.CheckUpgrade("1.34.4", "1.33.13"))
	// Output:
	// 1.34.4 1.34 registry.k8s.io/kube-apiserver:v1.34.4
	// <nil>
	// invalid: cannot downgrade from 1.34.4 to 1.33.13: downgrades are not supported
}
