package audit

import (
	"strconv"

	"github.com/hostplane/hostplane/pkg/api"
)

// Flags are kube-apiserver's audit flags: the policy at policyFile, a JSON log at logFile
// (one event per line) and a's retention of the rotated files.
func Flags(a api.Audit, policyFile, logFile string) []string {
	return []string{
		"--audit-policy-file=" + policyFile,
		"--audit-log-path=" + logFile,
		"--audit-log-format=json",
		"--audit-log-maxage=" + strconv.Itoa(a.MaxAgeDays),
		"--audit-log-maxbackup=" + strconv.Itoa(a.MaxBackups),
		"--audit-log-maxsize=" + strconv.Itoa(a.MaxSizeMB),
	}
}
