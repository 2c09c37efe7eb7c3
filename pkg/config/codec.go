package config

import (
	"encoding/json"
	"fmt"
)

// Codec turns values of T into the bytes stored under a key and back.
type Codec[T any] interface {
	Encode(T) ([]byte, error)
	Decode([]byte) (T, error)
}

// JSON is the Codec that stores values as JSON.
type JSON[T any] struct{}

// Encode marshals v as JSON.
func (JSON[T]) Encode(v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode config value as JSON: %w", err)
	}
	return b, nil
}

// Decode unmarshals JSON into a fresh T.
func (JSON[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode config value from JSON: %w", err)
	}
	return v, nil
}
