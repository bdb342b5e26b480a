use super::*;
use serde_json::json;

fn errors(err: Error) -> FieldErrors {
    match err {
        Error::Validation(errors) => errors,
        other => panic!("not a validation failure: {other}"),
    }
}

fn fields(err: Error) -> Vec<String> {
    errors(err).into_keys().map(String::from).collect()
}

#[test]
fn one_object_is_one_slot_in_utc() {
    let body = json!({"starts_at": "2026-12-01T09:00:00+01:00",
                      "ends_at": "2026-12-01T09:30:00.25Z", "capacity": 5});
    let NewSlots::One(slot) = NewSlots::from_json(&body).unwrap() else {
        panic!("one slot")
    };
    assert_eq!(slot.capacity, 5);
    assert_eq!(slot.starts_at.to_rfc3339(), "2026-12-01T08:00:00+00:00");
    assert_eq!(slot.ends_at.to_rfc3339(), "2026-12-01T09:30:00.250+00:00");
}

#[test]
fn every_problem_is_named_by_its_field_and_batch_position() {
    let good = json!({"starts_at": "2026-12-01T09:00:00Z",
                      "ends_at": "2026-12-01T10:00:00Z", "capacity": 1});
    let mut batch = vec![good.clone(); 5];
    batch[3]["capacity"] = json!(0);
    batch[4]["ends_at"] = json!("2026-12-01T08:00:00Z");
    batch[1]["starts_at"] = json!("2026-12-01 09:00:00Z");
    let err = NewSlots::from_json(&Value::Array(batch)).unwrap_err();
    assert_eq!(
        fields(err),
        ["1.starts_at", "3.capacity", "4.ends_at"],
        "every element's problems, at once"
    );
    let err = NewSlots::from_json(&json!({"capacity": 1_000_001, "colour": "red"})).unwrap_err();
    let errors = errors(err);
    assert!(errors["colour"][0].contains("\"colour\""), "{errors:?}");
    assert!(errors.contains_key("starts_at") && errors.contains_key("ends_at"));
    assert!(errors["capacity"][0].contains("1 to 1000000"), "{errors:?}");
    for bad in [json!(2.5), json!("3"), json!(-1), json!(null), json!(true)] {
        let body = json!({"starts_at": "2026-12-01T09:00:00Z",
                          "ends_at": "2026-12-01T10:00:00Z", "capacity": bad});
        assert_eq!(
            fields(NewSlots::from_json(&body).unwrap_err()),
            ["capacity"]
        );
    }
}

#[test]
fn the_body_must_be_an_object_or_a_batch_of_1_to_500() {
    let good = json!({"starts_at": "2026-12-01T09:00:00Z",
                      "ends_at": "2026-12-01T10:00:00Z", "capacity": 1});
    for bad in [
        json!(null),
        json!(3),
        json!("x"),
        json!([]),
        Value::Array(vec![good.clone(); MAX_BATCH + 1]),
        json!([good.clone(), 7]),
    ] {
        assert_eq!(fields(NewSlots::from_json(&bad).unwrap_err()), ["body"]);
    }
    let NewSlots::Many(slots) = NewSlots::from_json(&Value::Array(vec![good; MAX_BATCH])).unwrap()
    else {
        panic!("a batch")
    };
    assert_eq!(slots.len(), MAX_BATCH);
}

#[test]
fn a_change_names_at_least_one_known_field() {
    assert_eq!(
        fields(SlotChange::from_json(&json!({})).unwrap_err()),
        ["body"]
    );
    assert_eq!(
        fields(SlotChange::from_json(&json!([])).unwrap_err()),
        ["body"]
    );
    assert_eq!(
        fields(SlotChange::from_json(&json!({"remaining": 3})).unwrap_err()),
        ["remaining"]
    );
    assert_eq!(
        fields(SlotChange::from_json(&json!({"capacity": null})).unwrap_err()),
        ["capacity"]
    );
    let both = json!({"starts_at": "2026-12-01T10:00:00Z", "ends_at": "2026-12-01T10:00:00Z"});
    assert_eq!(
        fields(SlotChange::from_json(&both).unwrap_err()),
        ["ends_at"]
    );
    let change = SlotChange::from_json(&json!({"capacity": 7})).unwrap();
    assert_eq!(
        change,
        SlotChange {
            capacity: Some(7),
            ..SlotChange::default()
        }
    );
}
