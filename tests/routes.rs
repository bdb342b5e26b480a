//! The routes, four times over: `template.yaml` (the HttpApi events of
//! each function), the `make dev` router (`cargo lambda watch`'s
//! `[[workspace.metadata.lambda.watch.router]]` in Cargo.toml),
//! `openapi.yaml` (each operation's `x-function`) and the not-found
//! function's table (`shared::http::ROUTES`, for its 405s). A (method,
//! path) in one and not the others, or on another function, fails here. No
//! database.

use serde_json::Value;
use slot_booking_tests::watch::{DEV_FUNCTIONS, workspace_root};
use slot_booking_tests::{event_json, read};
use std::collections::{BTreeMap, BTreeSet};
use yaml_rust2::{Yaml, YamlLoader};

/// (METHOD, path) → function (crate/binary name).
type Routes = BTreeMap<(String, String), String>;

/// API Gateway's `$default` route and the router's catch-all.
const NOT_FOUND: &str = "not-found";
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

fn yaml(file: &str) -> Yaml {
    let path = workspace_root().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut docs = YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(docs.len(), 1, "{file}: one YAML document");
    docs.remove(0)
}

fn hash(node: &Yaml) -> Vec<(&str, &Yaml)> {
    node.as_hash()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.as_str()?, v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Every HttpApi event of every function, with its `BuildProperties.Binary`.
fn template_routes() -> Routes {
    let template = yaml("template.yaml");
    let mut routes = Routes::new();
    for (name, resource) in hash(&template["Resources"]) {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let events = hash(&resource["Properties"]["Events"]);
        let binary = resource["Metadata"]["BuildProperties"]["Binary"].as_str();
        for (event, spec) in events {
            if spec["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let binary = binary.unwrap_or_else(|| panic!("{name}: no BuildProperties.Binary"));
            let method = spec["Properties"]["Method"].as_str();
            let path = spec["Properties"]["Path"].as_str();
            let (Some(method), Some(path)) = (method, path) else {
                panic!("{name}.{event}: an HttpApi event without Method and Path");
            };
            let key = (method.to_ascii_uppercase(), path.to_string());
            if let Some(other) = routes.insert(key.clone(), binary.to_string()) {
                panic!("template.yaml: {key:?} twice, on {other} and {binary}");
            }
        }
    }
    routes
}

/// The router `make dev` serves (`cargo metadata` reads it as cargo
/// lambda does): the routes to API functions, and the (method, path)
/// pairs sent to `not-found`.
fn router() -> (Routes, BTreeSet<(String, String)>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata");
    assert!(output.status.success(), "cargo metadata failed");
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
    let entries = metadata["metadata"]["lambda"]["watch"]["router"]
        .as_array()
        .expect("[[workspace.metadata.lambda.watch.router]] in Cargo.toml")
        .clone();
    let (mut routes, mut not_found) = (Routes::new(), BTreeSet::new());
    for entry in entries {
        let path = entry["path"].as_str().expect("a router path").to_string();
        let function = entry["function"].as_str().expect("a router function");
        let methods: Vec<String> = match entry["methods"].as_array() {
            Some(methods) => methods
                .iter()
                .map(|m| m.as_str().expect("a method").to_ascii_uppercase())
                .collect(),
            None => vec!["ANY".into()],
        };
        for method in methods {
            let key = (method, path.clone());
            if function == NOT_FOUND {
                assert!(
                    not_found.insert(key.clone()),
                    "router: {key:?} listed twice"
                );
            } else if let Some(other) = routes.insert(key.clone(), function.to_string()) {
                panic!("router: {key:?} twice, on {other} and {function}");
            }
        }
    }
    (routes, not_found)
}

/// Every operation of openapi.yaml and its `x-function`.
fn openapi_routes() -> Routes {
    let doc = yaml("openapi.yaml");
    let mut routes = Routes::new();
    for (path, item) in hash(&doc["paths"]) {
        for (method, operation) in hash(item) {
            let method = method.to_ascii_uppercase();
            if !METHODS.contains(&method.as_str()) {
                continue; // `parameters`, `summary`, … of the path item
            }
            let function = operation["x-function"]
                .as_str()
                .unwrap_or_else(|| panic!("openapi.yaml: {method} {path} has no x-function"));
            routes.insert((method, path.to_string()), function.to_string());
        }
    }
    routes
}

/// Where the three disagree, one line each.
fn differences(template: &Routes, router: &Routes, openapi: &Routes) -> Vec<String> {
    let every: BTreeSet<&(String, String)> = template
        .keys()
        .chain(router.keys())
        .chain(openapi.keys())
        .collect();
    let show = |routes: &Routes, key: &(String, String)| {
        routes.get(key).map_or("missing".to_string(), String::clone)
    };
    every
        .into_iter()
        .filter(|key| {
            let on = [template.get(*key), router.get(*key), openapi.get(*key)];
            on.iter().any(Option::is_none) || on[0] != on[1] || on[1] != on[2]
        })
        .map(|key| {
            format!(
                "{} {}: template.yaml {}, make dev router {}, openapi.yaml {}",
                key.0,
                key.1,
                show(template, key),
                show(router, key),
                show(openapi, key)
            )
        })
        .collect()
}

#[test]
fn every_route_is_in_the_template_the_dev_router_and_openapi_on_the_same_function() {
    let mut template = template_routes();
    let (router, _) = router();
    let openapi = openapi_routes();
    assert_eq!(
        template.remove(&("ANY".into(), "$default".into())),
        Some(NOT_FOUND.into()),
        "template.yaml: the $default route goes to the not-found function"
    );
    let differences = differences(&template, &router, &openapi);
    assert!(
        differences.is_empty(),
        "the routes disagree:\n  {}",
        differences.join("\n  ")
    );
    assert!(template.len() >= 14, "{} routes", template.len());
}

#[test]
fn every_other_method_and_path_goes_to_not_found_in_the_dev_router() {
    let (routes, not_found) = router();
    for catch_all in ["/", "/{*path}"] {
        assert!(
            not_found.contains(&("ANY".into(), catch_all.into())),
            "router: {catch_all} goes to not-found"
        );
    }
    // The emulator's router does not fall back from a path that matched to
    // the catch-all: each path must list its other methods itself.
    let paths: BTreeSet<&String> = routes.keys().map(|(_, path)| path).collect();
    for path in paths {
        for method in METHODS {
            let key = (method.to_string(), path.clone());
            assert!(
                routes.contains_key(&key) ^ not_found.contains(&key),
                "router: {method} {path} must go to exactly one function"
            );
        }
    }
}

#[test]
fn make_dev_serves_every_routed_function() {
    let (routes, _) = router();
    let makefile = std::fs::read_to_string(workspace_root().join("Makefile")).expect("Makefile");
    let api: BTreeSet<&str> = makefile
        .lines()
        .find_map(|line| line.strip_prefix("API_FUNCTIONS :="))
        .expect("API_FUNCTIONS in the Makefile")
        .split_whitespace()
        .collect();
    let routed: BTreeSet<&str> = routes.values().map(String::as_str).collect();
    assert_eq!(api, routed, "Makefile API_FUNCTIONS against the router");
    for function in routed.iter().chain([&NOT_FOUND]) {
        assert!(
            DEV_FUNCTIONS.contains(function),
            "tests/support/watch.rs DEV_FUNCTIONS lacks {function}"
        );
    }
}

/// Each path of template.yaml's routes and its methods.
fn template_paths() -> BTreeMap<String, BTreeSet<String>> {
    let mut template = template_routes();
    template.remove(&("ANY".into(), "$default".into()));
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (method, path) in template.into_keys() {
        paths.entry(path).or_default().insert(method);
    }
    paths
}

/// API Gateway's `$default` route, as the not-found function receives it.
fn default_route(method: &str, path: &str) -> lambda_http::Request {
    let mut event = event_json("apigw_v2_default_route_hold.json", path, None, &[]);
    event["requestContext"]["http"]["method"] = method.into();
    lambda_http::request::from_str(&event.to_string()).expect("an API Gateway v2 event")
}

/// SPEC §19.8. A known path with a method it does not serve reaches the
/// not-found function (API Gateway's `$default` route, and the dev
/// router's lists: see above); it answers 405 `method_not_allowed` with an
/// `Allow` header naming exactly the template's methods of that path. An
/// unknown path stays 404 `not_found`, without `Allow`.
#[tokio::test]
async fn a_known_path_answers_405_with_its_methods_in_allow_and_an_unknown_path_404() {
    let served = template_paths();
    let mut checked = 0;
    for (path, methods) in &served {
        let concrete = path.replace("{id}", "7");
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            if methods.contains(method) {
                continue;
            }
            let response = shared::http::not_found(default_route(method, &concrete))
                .await
                .expect("an answer");
            let allow = response
                .headers()
                .get("allow")
                .map(|v| v.to_str().expect("text").to_string());
            let (status, body) = read(response);
            let what = format!("{method} {concrete}");
            assert_eq!(
                (status, body["reason"].as_str()),
                (405, Some("method_not_allowed")),
                "{what}: {body}"
            );
            assert!(body["message"].is_string(), "{what}: {body}");
            let allow = allow.unwrap_or_else(|| panic!("{what}: no Allow header"));
            let listed: BTreeSet<String> = allow.split(',').map(|m| m.trim().into()).collect();
            assert_eq!(&listed, methods, "{what}: Allow: {allow}");
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked} (path, method) pairs");
    for path in [
        "/",
        "/no/such/route",
        "/slots/7/hold/extra",
        "/slots/availability/extra",
        "/holds//confirm",
        "/clients/7/keys",
        "/Slots",
    ] {
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let response = shared::http::not_found(default_route(method, path))
                .await
                .expect("an answer");
            let what = format!("{method} {path}");
            assert!(response.headers().get("allow").is_none(), "{what}");
            let (status, body) = read(response);
            assert_eq!(
                (status, body["reason"].as_str()),
                (404, Some("not_found")),
                "{what}: {body}"
            );
        }
    }
}

/// Through a named stage the raw path starts with it: the route is the
/// rest (the template's stage is `$default`, which adds nothing).
#[tokio::test]
async fn behind_a_named_stage_the_path_after_it_is_the_route() {
    let mut event = event_json("apigw_v2_default_route_hold.json", "/prod/slots", None, &[]);
    event["requestContext"]["http"]["method"] = "GET".into();
    event["requestContext"]["stage"] = "prod".into();
    let request = lambda_http::request::from_str(&event.to_string()).expect("an event");
    let response = shared::http::not_found(request).await.expect("an answer");
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "POST");
    let request = default_route("GET", "/prod/slots");
    let response = shared::http::not_found(request).await.expect("an answer");
    assert_eq!(response.status(), 404, "no stage: /prod/slots is no path");
}

/// The not-found function's table (`shared::http::ROUTES`) is the
/// template's routes, path by path.
#[test]
fn the_not_found_functions_table_is_the_templates_routes() {
    let mut table: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, methods) in shared::http::ROUTES {
        let methods = methods.iter().map(|m| m.to_string()).collect();
        assert!(
            table.insert(path.to_string(), methods).is_none(),
            "shared::http::ROUTES: {path} twice"
        );
    }
    assert_eq!(
        table,
        template_paths(),
        "shared::http::ROUTES against template.yaml"
    );
}

/// The route each function names on its summary log line
/// (`shared::http::serve("POST /slots/{id}/hold", …)` in its `main.rs`)
/// is its route in the template: a renamed path cannot leave the logs
/// (and the operators' queries) on the old one.
#[test]
fn every_function_logs_its_template_route() {
    let mut template = template_routes();
    template.remove(&("ANY".into(), "$default".into()));
    for ((method, path), function) in &template {
        let main = workspace_root().join(format!("functions/{function}/src/main.rs"));
        let source = std::fs::read_to_string(&main).expect("main.rs");
        // A page's files are logged as the page (`GET /console/{name}`
        // under `GET /console`); a page needs no app.
        let route = format!(
            "\"{method} {}\"",
            path.strip_suffix("/{name}").unwrap_or(path)
        );
        let named = [
            format!("shared::http::serve({route}"),
            format!("shared::http::serve_without_app({route}"),
        ];
        assert!(
            named.iter().any(|named| source.contains(named)),
            "{}: {route}",
            main.display()
        );
    }
    let not_found =
        std::fs::read_to_string(workspace_root().join("functions/not-found/src/main.rs"))
            .expect("not-found's main.rs");
    assert!(not_found.contains("shared::http::serve_without_app(\"$default\""));
}
