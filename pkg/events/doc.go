// Package events defines hostplane's event vocabulary: the CloudEvents envelope (JSON,
// structured mode), the subject grammar hostplane.evt.<cluster>.<resource>.<verb> and
// hostplane.in.<cluster>.<type>, with a builder and a strict parser.
//
// An event only says "this key changed": consumers re-read state and converge.
package events
