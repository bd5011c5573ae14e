package httpapi

import (
	"encoding/json"

	"github.com/danielgtaylor/huma/v2"
)

// JSONObject is a request field that keeps a JSON value's bytes as sent (an event's data, compared
// byte for byte on replay). The document shows it as an object, so a client generated from it sends
// none of the nulls or other JSON types the handler's own check refuses.
type JSONObject json.RawMessage

func (o JSONObject) MarshalJSON() ([]byte, error)    { return json.RawMessage(o).MarshalJSON() }
func (o *JSONObject) UnmarshalJSON(raw []byte) error { return (*json.RawMessage)(o).UnmarshalJSON(raw) }

// Schema is the document's schema of a JSONObject.
func (JSONObject) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true}
}
