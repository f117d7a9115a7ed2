module github.com/hostplane/hostplane/test/e2e

go 1.26.0

require (
	github.com/hostplane/hostplane/cmd/hostplane v0.0.0
	github.com/hostplane/hostplane/pkg v0.0.0
)

require (
	github.com/blang/semver/v4 v4.0.0 // indirect
	sigs.k8s.io/kustomize/api v0.20.1 // indirect
)

replace (
	github.com/hostplane/hostplane/cmd/hostplane => ../../cmd/hostplane
	github.com/hostplane/hostplane/pkg => ../../pkg
	github.com/hostplane/hostplane/services/clusterd => ../../services/clusterd
	github.com/hostplane/hostplane/services/componentd => ../../services/componentd
	github.com/hostplane/hostplane/services/ignitiond => ../../services/ignitiond
	github.com/hostplane/hostplane/services/infrad => ../../services/infrad
	github.com/hostplane/hostplane/services/localcloud => ../../services/localcloud
	github.com/hostplane/hostplane/services/nodepoold => ../../services/nodepoold
	github.com/hostplane/hostplane/services/pkid => ../../services/pkid
)
