use super::*;
use serde_json::json;

const STRICT: Rules = Rules {
    allow_http: false,
    allow_private: false,
    max_per_client: 10,
};

fn fields(result: Result<impl std::fmt::Debug, Error>) -> Vec<String> {
    match result {
        Err(Error::Validation(errors)) => errors.keys().map(|k| k.to_string()).collect(),
        other => panic!("refused: {other:?}"),
    }
}

#[test]
fn a_new_subscription_needs_a_url_and_takes_the_rest_as_every_type_and_no_description() {
    let new = NewSubscription::from_json(&json!({"url": "https://hooks.example.com/in"}), &STRICT)
        .unwrap();
    assert_eq!(new.url.as_str(), "https://hooks.example.com/in");
    assert_eq!((new.event_types, new.description.as_str()), (None, ""));
    let full =
        json!({"url": "https://h.example/", "event_types": ["hold.*"], "description": "shop"});
    let full = NewSubscription::from_json(&full, &STRICT).unwrap();
    assert_eq!(full.event_types.unwrap().entries(), ["hold.*"]);
    assert_eq!(full.description, "shop");
}

#[test]
fn every_bad_field_of_a_new_subscription_is_named() {
    let new = |body: Value| fields(NewSubscription::from_json(&body, &STRICT));
    assert_eq!(new(json!([])), ["body"]);
    assert_eq!(new(json!("x")), ["body"]);
    assert_eq!(new(json!({})), ["url"]);
    assert_eq!(new(json!({"url": null})), ["url"]);
    assert_eq!(new(json!({"url": 5})), ["url"]);
    assert_eq!(new(json!({"url": "http://h.example/"})), ["url"]);
    assert_eq!(new(json!({"url": "https://u:p@h.example/"})), ["url"]);
    let private = json!({"url": "https://10.0.0.1/"});
    assert!(
        NewSubscription::from_json(&private, &STRICT).is_ok(),
        "its address is the service's to check"
    );
    let long = format!("https://h.example/{}", "a".repeat(2048));
    assert_eq!(new(json!({ "url": long })), ["url"]);
    assert_eq!(
        new(json!({"url": "https://h.example/", "event_types": ["hold.made"]})),
        ["event_types"]
    );
    assert_eq!(
        new(json!({"url": "https://h.example/", "description": "x".repeat(501)})),
        ["description"]
    );
    assert_eq!(
        new(json!({"url": "https://h.example/", "description": 1})),
        ["description"]
    );
    assert_eq!(
        new(json!({"url": "https://h.example/", "status": "enabled"})),
        ["status"],
        "a new subscription is enabled; status is a patch's"
    );
    assert_eq!(
        new(json!({"url": "ftp://x/", "event_types": "hold.*", "secret": "s", "id": 1})),
        ["event_types", "id", "secret", "url"]
    );
}

#[test]
fn a_patch_names_what_it_changes_and_every_bad_field() {
    let patch = SubscriptionPatch::from_json(&json!({}), &STRICT).unwrap();
    assert_eq!(patch, SubscriptionPatch::default());
    let every = json!({"event_types": null, "status": "disabled", "description": null});
    let every = SubscriptionPatch::from_json(&every, &STRICT).unwrap();
    assert_eq!(every.event_types, Some(None));
    assert_eq!(every.status, Some(Status::Disabled));
    assert_eq!(every.description.as_deref(), Some(""));
    let bad = json!({"url": null, "event_types": [], "status": "paused", "client_id": 2});
    assert_eq!(
        fields(SubscriptionPatch::from_json(&bad, &STRICT)),
        ["client_id", "event_types", "status", "url"]
    );
    assert_eq!(
        fields(SubscriptionPatch::from_json(&json!(null), &STRICT)),
        ["body"]
    );
}
