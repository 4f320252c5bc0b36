//! The apiserver's `/metrics`: parsing the exposition text and keeping the admission webhook series over time.
