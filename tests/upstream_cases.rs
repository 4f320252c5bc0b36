//! Every case of upstream's webhook admission test suite (`fixtures/upstream-cases.json`), run
//! against the engine: one test per category, each reporting all of its failing cases.

mod upstream;

use upstream::unit;

#[test]
fn rules() {
    unit::rules().finish();
}

#[test]
fn namespace_selector() {
    unit::namespace_selector().finish();
}

#[test]
fn object_selector() {
    unit::object_selector().finish();
}

#[test]
fn should_call_hook() {
    unit::should_call_hook().finish();
}

#[test]
fn match_conditions_unit() {
    unit::match_conditions_unit().finish();
}

#[test]
fn verify_admission_response() {
    unit::verify_admission_response().finish();
}

#[test]
fn create_admission_objects() {
    unit::create_admission_objects().finish();
}

#[test]
fn to_status_err() {
    unit::to_status_err_cases().finish();
}

#[test]
fn annotation_format() {
    unit::annotation_format().finish();
}

#[test]
fn webhook_source_order() {
    unit::webhook_source_order().finish();
}

use upstream::{ServerRef, dispatcher};

fn server() -> ServerRef {
    ServerRef {
        host_port: "127.0.0.1:1".into(),
        ca_pem: Vec::new(),
    }
}

#[test]
fn dispatcher_plugin_cases() {
    dispatcher::dispatcher(&server()).finish();
}

#[test]
fn dispatcher_panic() {
    dispatcher::dispatcher_panic(&server()).finish();
}

#[test]
fn dispatcher_cached_client() {
    dispatcher::dispatcher_cached_client(&server()).finish();
}

#[test]
fn dispatcher_duration() {
    dispatcher::dispatcher_duration(&server()).finish();
}

#[test]
fn dispatcher_exclusion() {
    dispatcher::dispatcher_exclusion(&server()).finish();
}

use upstream::integration;

#[test]
fn integration_reinvocation() {
    integration::reinvocation(&server()).finish();
}

#[test]
fn integration_timeout() {
    integration::timeout(&server()).finish();
}

#[test]
fn integration_match_conditions() {
    integration::match_conditions(&server()).finish();
}
