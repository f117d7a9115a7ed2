module github.com/hostplane/hostplane/services/componentd

go 1.26.0

require (
	github.com/hostplane/hostplane/pkg v0.0.0
	github.com/hostplane/hostplane/services/infrad v0.0.0
	github.com/hostplane/hostplane/services/pkid v0.0.0
)

require (
	k8s.io/api v0.34.3 // indirect
	k8s.io/apimachinery v0.34.3 // indirect
	k8s.io/client-go v0.34.3 // indirect
)

replace (
	github.com/hostplane/hostplane/pkg => ../../pkg
	github.com/hostplane/hostplane/services/infrad => ../infrad
	github.com/hostplane/hostplane/services/pkid => ../pkid
)
