//! Every case of upstream's webhook admission test suite (`fixtures/upstream-cases.json`), run
//! against the engine: one test per category, each reporting all of its failing cases.

mod common;
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

use upstream::dispatcher::{self, Upstream};

#[test]
fn dispatcher_plugin_cases() {
    dispatcher::dispatcher(&Upstream::unit_server()).finish();
}

#[test]
fn dispatcher_panic() {
    dispatcher::dispatcher_panic(&Upstream::unit_server()).finish();
}

#[test]
fn dispatcher_cached_client() {
    dispatcher::dispatcher_cached_client(&Upstream::unit_server()).finish();
}

#[test]
fn dispatcher_duration() {
    dispatcher::dispatcher_duration(&Upstream::unit_server()).finish();
}

#[test]
fn dispatcher_exclusion() {
    dispatcher::dispatcher_exclusion(&Upstream::unit_server()).finish();
}

use upstream::integration;

#[test]
fn integration_reinvocation() {
    integration::reinvocation().finish();
}

#[test]
fn integration_timeout() {
    integration::timeout().finish();
}

#[test]
fn integration_match_conditions() {
    integration::match_conditions().finish();
}

#[test]
fn e2e() {
    upstream::e2e::e2e().finish();
}

#[test]
fn configuration_validation() {
    unit::configuration_validation().finish();
}

/// `auth-info-resolver` is run by `tests/auth_resolver.rs` from its own copy of these cases
/// (`fixtures/auth/auth-info-resolver.json`); here only the two copies are held to each other.
#[test]
fn auth_info_resolver_is_covered_by_auth_resolver_tests() {
    let theirs: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/auth/auth-info-resolver.json"))
            .expect("auth fixture");
    let ours = upstream::cases("auth-info-resolver");
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(
            *a, b,
            "auth-info-resolver case differs from tests/auth_resolver.rs's"
        );
    }
    println!(
        "auth-info-resolver: {} cases, run by tests/auth_resolver.rs",
        ours.len()
    );
}
