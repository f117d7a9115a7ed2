module github.com/hostplane/hostplane/services/localcloud

go 1.26.0

require github.com/hostplane/hostplane/pkg v0.0.0

replace github.com/hostplane/hostplane/pkg => ../../pkg
