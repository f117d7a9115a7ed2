module github.com/hostplane/hostplane/cmd/hostplane

go 1.26.0

require (
	github.com/hostplane/hostplane/pkg v0.0.0
	github.com/hostplane/hostplane/services/clusterd v0.0.0
	github.com/hostplane/hostplane/services/componentd v0.0.0
	github.com/hostplane/hostplane/services/ignitiond v0.0.0
	github.com/hostplane/hostplane/services/infrad v0.0.0
	github.com/hostplane/hostplane/services/nodepoold v0.0.0
	github.com/hostplane/hostplane/services/pkid v0.0.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)

replace (
	github.com/hostplane/hostplane/pkg => ../../pkg
	github.com/hostplane/hostplane/services/clusterd => ../../services/clusterd
	github.com/hostplane/hostplane/services/componentd => ../../services/componentd
	github.com/hostplane/hostplane/services/ignitiond => ../../services/ignitiond
	github.com/hostplane/hostplane/services/infrad => ../../services/infrad
	github.com/hostplane/hostplane/services/nodepoold => ../../services/nodepoold
	github.com/hostplane/hostplane/services/pkid => ../../services/pkid
)
