//! The API's paths and the methods each serves, for API Gateway's
//! `$default` route: a known path with another method answers 405 with
//! these in `Allow` (SPEC §19.8), any other path 404. tests/routes.rs holds
//! this table to template.yaml's routes, as it holds those to the `make
//! dev` router and openapi.yaml.

/// Every path the API serves (a `{…}` segment stands for one non-empty
/// segment) and its methods.
pub const ROUTES: [(&str, &[&str]); 24] = [
    ("/slots/availability", &["GET"]),
    ("/slots", &["POST"]),
    ("/slots/{id}", &["GET", "PATCH", "DELETE"]),
    ("/slots/{id}/hold", &["POST"]),
    ("/slots/{id}/waitlist", &["POST"]),
    ("/waitlist/{id}", &["GET", "DELETE"]),
    ("/holds", &["GET"]),
    ("/holds/{id}", &["GET", "DELETE"]),
    ("/holds/{id}/confirm", &["POST"]),
    ("/holds/{id}/extend", &["POST"]),
    ("/holds/{id}/move", &["POST"]),
    ("/events", &["GET"]),
    ("/clients", &["GET", "POST"]),
    ("/clients/{id}", &["PATCH", "DELETE"]),
    ("/webhooks", &["GET", "POST"]),
    ("/webhooks/{id}", &["GET", "PATCH", "DELETE"]),
    ("/webhooks/{id}/secret", &["POST"]),
    ("/webhooks/{id}/deliveries", &["GET"]),
    ("/webhooks/{id}/ping", &["POST"]),
    ("/console", &["GET"]),
    ("/console/{name}", &["GET"]),
    ("/docs", &["GET"]),
    ("/docs/{name}", &["GET"]),
    ("/openapi.yaml", &["GET"]),
];

/// The methods the API serves on `path`, or `None` when no route has that
/// path. A literal segment wins over a parameter, as in both routers:
/// `/slots/availability` is the list, not a slot.
pub fn methods_of(path: &str) -> Option<&'static [&'static str]> {
    let segments: Vec<&str> = path.split('/').collect();
    ROUTES
        .iter()
        .filter(|(template, _)| matches(template, &segments))
        .min_by_key(|(template, _)| template.split('/').filter(|s| is_parameter(s)).count())
        .map(|(_, methods)| *methods)
}

fn matches(template: &str, path: &[&str]) -> bool {
    let template: Vec<&str> = template.split('/').collect();
    template.len() == path.len()
        && template.iter().zip(path).all(|(expected, segment)| {
            if is_parameter(expected) {
                !segment.is_empty()
            } else {
                expected == segment
            }
        })
}

fn is_parameter(segment: &str) -> bool {
    segment.starts_with('{') && segment.ends_with('}')
}

#[cfg(test)]
mod tests {
    use super::methods_of;

    #[test]
    fn a_path_is_matched_segment_by_segment_and_a_literal_beats_an_id() {
        assert_eq!(methods_of("/slots/availability"), Some(&["GET"][..]));
        assert_eq!(
            methods_of("/slots/abc"),
            Some(&["GET", "PATCH", "DELETE"][..])
        );
        assert_eq!(methods_of("/holds/7/confirm"), Some(&["POST"][..]));
        assert_eq!(methods_of("/clients"), Some(&["GET", "POST"][..]));
        assert_eq!(methods_of("/console/main.js"), Some(&["GET"][..]));
        assert_eq!(methods_of("/openapi.yaml"), Some(&["GET"][..]));
        for unknown in [
            "",
            "/",
            "/slots/",
            "/holds//confirm",
            "/slots/7/hold/",
            "/slots/availability/x",
            "/Slots",
            "slots",
            "/prod/slots",
            "/console/",
            "/docs/a/b",
            "/openapi.json",
        ] {
            assert_eq!(methods_of(unknown), None, "{unknown:?}");
        }
    }
}
