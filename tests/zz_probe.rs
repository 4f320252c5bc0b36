use hookscope::KubeVersion;
use hookscope::cel::{Env, ReturnType};
#[test]
fn probe() {
    let obj = serde_json::json!({"data": {"a": "x", "b": ""}, "l": [1,2]});
    for minor in [31u32, 32, 33, 34] {
        let env = Env::policy(false).for_release(KubeVersion::new(minor).unwrap());
        for e in [
            "object.data.all(k, v, v != '')",
            "object.data.exists(k, v, v == '')",
            "object.data.existsOne(k, v, v == '')",
            "object.l.all(i, v, v > i)",
            "object.data.transformMap(k, v, v + 'z') == {}",
            "object.l.transformList(i, v, v * 2) == []",
            "object.data.transformMapEntry(k, v, {v: k}) == {}",
            "object.l.exists_one(x, x == 1)",
            "object.missing in []",
            "object.l.existsOne(x, x == 1)",
        ] {
            let r = hookscope::cel::evaluate_standalone(e, &env, ReturnType::Any, &obj);
            eprintln!("{minor} {e}: {r:?}");
        }
    }
}
