package workflow

import "github.com/troupe-rt/troupe/messages"

// The workflow error codes (WORKFLOW.md 3.5). Every code is fatal inside a script.
const (
	CodeScriptParse          messages.Code = "SCRIPT_PARSE"
	CodeMetaInvalid          messages.Code = "META_INVALID"
	CodeInvalidArgument      messages.Code = "INVALID_ARGUMENT"
	CodeUnsupportedOption    messages.Code = "UNSUPPORTED_OPTION"
	CodeUnsupportedSchema    messages.Code = "UNSUPPORTED_SCHEMA"
	CodeAgentCap             messages.Code = "AGENT_CAP"
	CodeItemCap              messages.Code = "ITEM_CAP"
	CodeAgentStart           messages.Code = "AGENT_START"
	CodeAgentResult          messages.Code = "AGENT_RESULT"
	CodeResultUnserializable messages.Code = "RESULT_UNSERIALIZABLE"
	CodeCancelled            messages.Code = "CANCELLED"
)

// Sentinels for errors.Is (they match any *messages.Error with the same code).
var (
	ErrScriptParse          = &messages.Error{Code: CodeScriptParse}
	ErrMetaInvalid          = &messages.Error{Code: CodeMetaInvalid}
	ErrInvalidArgument      = &messages.Error{Code: CodeInvalidArgument}
	ErrUnsupportedOption    = &messages.Error{Code: CodeUnsupportedOption}
	ErrUnsupportedSchema    = &messages.Error{Code: CodeUnsupportedSchema}
	ErrAgentCap             = &messages.Error{Code: CodeAgentCap}
	ErrItemCap              = &messages.Error{Code: CodeItemCap}
	ErrAgentStart           = &messages.Error{Code: CodeAgentStart}
	ErrAgentResult          = &messages.Error{Code: CodeAgentResult}
	ErrResultUnserializable = &messages.Error{Code: CodeResultUnserializable}
	ErrCancelled            = &messages.Error{Code: CodeCancelled}
	// ErrStopped: the engine's scope is disposed (or the system shut down).
	ErrStopped = &messages.Error{Code: messages.CodeStopped}
)

func newErr(code messages.Code, msg string) *messages.Error {
	return &messages.Error{Code: code, Message: msg}
}

var errEngineStopped = newErr(messages.CodeStopped, "workflow engine is stopped")
