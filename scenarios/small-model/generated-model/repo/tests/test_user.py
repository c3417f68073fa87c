from app.models_gen import User


def test_user_keeps_its_first_fields():
    assert list(User.__dataclass_fields__)[:2] == ["id", "name"]
