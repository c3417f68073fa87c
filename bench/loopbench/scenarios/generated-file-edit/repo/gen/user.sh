# GENERATED from schema/user.fields by tools/gen.sh; do not edit
USER_FIELDS="id name"
