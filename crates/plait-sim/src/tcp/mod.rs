//! TCP models with ns-2 parity (../shared/REFERENCES.md): a NewReno sender and a sink.
