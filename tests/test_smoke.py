def test_it_answers_whoami(embedded_hub):
    token = embedded_hub.token("alice")
    assert embedded_hub.api(token).whoami()["name"] == "alice"
